package lenient

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "sigs.k8s.io/json"
)

// Object is a pointer to a Kubernetes object type T.
type Object[T any] interface {
	*T
	runtime.Object
	metav1.Object
}

// decode decodes one object as the clientset would. When that fails, it decodes a stand-in
// without the part that failed (the spec; then the status too), and returns the stand-in
// with the original error: the stand-in carries the object's identity, so that the failure
// can be reported on the object, and its status, so that what ran can still be torn down.
func decode[T any, PT Object[T]](raw []byte) (obj PT, decodeErr error, err error) {
	obj = PT(new(T))
	decodeErr = kjson.UnmarshalCaseSensitivePreserveInts(raw, obj)
	if decodeErr == nil {
		return obj, nil, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, nil, fmt.Errorf("decode object: %w", err)
	}
	for _, drop := range []string{"spec", "status"} {
		delete(fields, drop)
		trimmed, err := json.Marshal(fields)
		if err != nil {
			return nil, nil, fmt.Errorf("encode stand-in: %w", err)
		}
		obj = PT(new(T))
		if kjson.UnmarshalCaseSensitivePreserveInts(trimmed, obj) == nil {
			return obj, decodeErr, nil
		}
	}
	return nil, nil, fmt.Errorf("decode object metadata: %w", decodeErr)
}
