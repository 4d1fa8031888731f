package trigger

import (
	"cmp"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// selectorOf is the trigger's selector; none matches every object.
func selectorOf(trig *v1alpha1.PipelineTrigger) (labels.Selector, error) {
	if trig.Spec.Selector == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(trig.Spec.Selector)
}

// match reads the objects of the trigger's kind in its scope (the trigger's namespace for
// a namespaced kind, the cluster for a cluster-scoped one) from the informer, and keeps
// those its selector matches, in the order of matching: the oldest object first
// (creationTimestamp), then by namespace/name. This is the order the waiting objects
// start in, and the order of status.queue. An object being deleted counts as gone.
func (ts *triggerSync) match(lister cache.GenericLister, selector labels.Selector) error {
	var list []runtime.Object
	var err error
	if ts.target.namespaced {
		list, err = lister.ByNamespace(ts.trig.Namespace).List(labels.Everything())
	} else {
		list, err = lister.List(labels.Everything())
	}
	if err != nil {
		return fmt.Errorf("list %s from cache: %w", ts.target.gvr.GroupResource(), err)
	}
	for _, item := range list {
		obj, ok := item.(*unstructured.Unstructured)
		if !ok || obj.GetDeletionTimestamp() != nil {
			continue
		}
		ts.present[obj.GetUID()] = obj
		if selector.Matches(labels.Set(obj.GetLabels())) {
			ts.objects = append(ts.objects, obj)
		}
	}
	slices.SortFunc(ts.objects, compareObjects)
	return nil
}

// compareObjects orders objects by creationTimestamp, then namespace, then name.
func compareObjects(a, b *unstructured.Unstructured) int {
	ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
	if c := ta.Compare(tb.Time); c != 0 {
		return c
	}
	if c := cmp.Compare(a.GetNamespace(), b.GetNamespace()); c != 0 {
		return c
	}
	return cmp.Compare(a.GetName(), b.GetName())
}
