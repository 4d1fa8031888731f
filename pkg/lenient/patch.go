package lenient

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// DecodeErrors tells which objects of a kind the informer could not decode;
// *Undecodable is one. Controllers take this interface so that tests can name objects.
type DecodeErrors interface {
	Err(obj metav1.Object) error
}

// Patcher writes merge patches to objects of one resource without decoding the answer:
// the answer holds what could not be decoded.
type Patcher interface {
	Patch(ctx context.Context, namespace, name string, patch []byte, subresources ...string) error
}

// RESTPatcher is a Patcher over a REST client.
type RESTPatcher struct {
	Client         rest.Interface
	Resource       string
	FieldManager   string
	ParameterCodec runtime.ParameterCodec
}

// Patch sends a merge patch and reads nothing of the answer but its status.
func (r RESTPatcher) Patch(ctx context.Context, namespace, name string, patch []byte, subresources ...string) error {
	return r.Client.Patch(types.MergePatchType).Namespace(namespace).Resource(r.Resource).Name(name).
		SubResource(subresources...).VersionedParams(&metav1.PatchOptions{FieldManager: r.FieldManager}, r.ParameterCodec).
		Body(patch).Do(ctx).Error()
}
