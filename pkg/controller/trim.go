package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// lastAppliedAnnotation is where `kubectl apply` keeps a second copy of the whole object.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// TrimForCache is an informer transform (and what the controller does to the objects its
// writes return) that drops what the engine never reads: metadata.managedFields and the
// last-applied annotation of `kubectl apply`, together often larger than the pipeline
// itself; and it compacts a pipeline (compactPipeline), the cache holding them all.
// Writes are unaffected: status updates ignore metadata, and patches name only what they
// change.
func TrimForCache(obj any) (any, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil // a tombstone or something else: leave it as it is
	}
	m.SetManagedFields(nil)
	if a := m.GetAnnotations(); a != nil {
		if _, ok := a[lastAppliedAnnotation]; ok {
			delete(a, lastAppliedAnnotation)
			m.SetAnnotations(a)
		}
	}
	if p, ok := obj.(*v1alpha1.Pipeline); ok {
		compactPipeline(p)
	}
	return obj, nil
}
