package trigger

import (
	"cmp"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// selectorOf is the trigger's selector; none matches every object.
func selectorOf(trig *v1alpha1.PipelineTrigger) (labels.Selector, error) {
	if trig.Spec.Selector == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(trig.Spec.Selector.AsMeta())
}

// match reads the objects of the trigger's kind in its scope (the trigger's namespace for
// a namespaced kind, the cluster for a cluster-scoped one) from the informer, and keeps
// those its selector and field requirements match, in the order of matching: the oldest object first
// (creationTimestamp), then by namespace/name. This is the order the waiting objects
// start in, and the order of status.queue. An object being deleted counts as gone; a
// Pipeline a trigger made is none (MadeByTrigger).
func (ts *triggerSync) match(lister cache.GenericLister, selector labels.Selector, fields FieldMatcher) error {
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
		if !ok || obj.GetDeletionTimestamp() != nil || MadeByTrigger(ts.target.gvr.GroupResource(), obj) {
			continue
		}
		ts.present[obj.GetUID()] = obj
		if selector.Matches(labels.Set(obj.GetLabels())) && fields.Matches(obj) {
			ts.objects = append(ts.objects, obj)
		}
	}
	slices.SortFunc(ts.objects, CompareObjects)
	return nil
}

// MadeByTrigger tells whether obj, of resource gr, is a stepwise Pipeline that a trigger
// made (it carries LabelTrigger, whatever its value). No trigger matches one: a trigger on
// Pipelines would match the pipelines it makes, make one for each, and for those again,
// without end; two triggers on each other's pipelines would do the same. Ignoring such
// objects, rather than refusing triggers on Pipelines, ends every such loop and keeps
// triggers on the Pipelines people make (and their reruns, which drop the label).
func MadeByTrigger(gr schema.GroupResource, obj metav1.Object) bool {
	_, made := obj.GetLabels()[LabelTrigger]
	return made && gr == v1alpha1.SchemeGroupVersion.WithResource("pipelines").GroupResource()
}

// CompareObjects orders objects by creationTimestamp, then namespace, then name.
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

// fieldRequirement is a parsed spec.matchFields item.
type fieldRequirement struct {
	path     []string
	operator v1alpha1.FieldOperator
	values   map[string]bool
}

// FieldMatcher is a trigger's spec.matchFields, parsed; every requirement must hold.
type FieldMatcher []fieldRequirement

// ParseMatchFields parses spec.matchFields; the error names the item.
func ParseMatchFields(reqs []v1alpha1.FieldRequirement) (FieldMatcher, error) {
	out := make(FieldMatcher, 0, len(reqs))
	for i, r := range reqs {
		path, err := parsePath(r.Field)
		if err != nil {
			return nil, fmt.Errorf("spec.matchFields[%d].field: %w", i, err)
		}
		fr := fieldRequirement{path: path, operator: r.Operator, values: map[string]bool{}}
		switch r.Operator {
		case v1alpha1.FieldIn, v1alpha1.FieldNotIn:
			if len(r.Values) == 0 {
				return nil, fmt.Errorf("spec.matchFields[%d]: %s needs values", i, r.Operator)
			}
		case v1alpha1.FieldExists, v1alpha1.FieldDoesNotExist:
			if len(r.Values) != 0 {
				return nil, fmt.Errorf("spec.matchFields[%d]: %s takes no values", i, r.Operator)
			}
		default:
			return nil, fmt.Errorf("spec.matchFields[%d].operator: %q is not In, NotIn, Exists or DoesNotExist", i, r.Operator)
		}
		for _, v := range r.Values {
			fr.values[v] = true
		}
		out = append(out, fr)
	}
	return out, nil
}

// matches tells whether obj meets every requirement. A field that is not a string, number
// or bool is in no set of values.
func (m FieldMatcher) Matches(obj *unstructured.Unstructured) bool {
	for _, r := range m {
		v, found := lookup(obj, r.path)
		text, kind := scalarText(v)
		in := found && kind == "" && r.values[text]
		var ok bool
		switch r.operator {
		case v1alpha1.FieldIn:
			ok = in
		case v1alpha1.FieldNotIn:
			ok = !in
		case v1alpha1.FieldExists:
			ok = found
		case v1alpha1.FieldDoesNotExist:
			ok = !found
		}
		if !ok {
			return false
		}
	}
	return true
}
