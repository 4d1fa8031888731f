package rules

import (
	"cmp"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// CompareObjects is the order in which a trigger's waiting objects start, and the order of
// its status.queue: the oldest object first (creationTimestamp), then by namespace, then
// by name, so that the order is total and the same at every sync.
func CompareObjects(a, b *unstructured.Unstructured) int {
	ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
	if c := ta.Compare(tb.Time); c != 0 {
		return c
	}
	if c := cmp.Compare(a.GetNamespace(), b.GetNamespace()); c != 0 {
		return c
	}
	return cmp.Compare(a.GetName(), b.GetName())
}
