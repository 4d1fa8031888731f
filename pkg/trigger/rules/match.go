package rules

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// Matcher is a trigger's spec.selector and spec.matchFields, parsed: which objects of its
// kind it runs pipelines for.
type Matcher struct {
	selector labels.Selector
	fields   FieldMatcher
}

// ParseMatcher parses the trigger's selector (none matches every object) and matchFields.
// The error names the field that does not parse; either makes the trigger invalid as a
// whole.
func ParseMatcher(trig *v1alpha1.PipelineTrigger) (*Matcher, error) {
	selector, err := SelectorOf(trig.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	fields, err := ParseMatchFields(trig.Spec.MatchFields)
	if err != nil {
		return nil, err
	}
	return &Matcher{selector: selector, fields: fields}, nil
}

// Selector is the label selector alone, for a list to filter on the server; Matches still
// decides.
func (m *Matcher) Selector() labels.Selector { return m.selector }

// Paths are the fields matchFields reads (the selector reads labels, which every cached
// object keeps).
func (m *Matcher) Paths() [][]string { return m.fields.Paths() }

// Matches tells whether obj's labels and fields match. Call it on objects that are
// Eligible.
func (m *Matcher) Matches(obj *unstructured.Unstructured) bool {
	return m.selector.Matches(labels.Set(obj.GetLabels())) && m.fields.Matches(obj)
}

// Eligible tells whether obj, of resource gr, is an object a trigger looks at at all: one
// being deleted counts as gone, and a Pipeline a trigger made is none (MadeByTrigger).
func Eligible(gr schema.GroupResource, obj metav1.Object) bool {
	return obj.GetDeletionTimestamp() == nil && !MadeByTrigger(gr, obj)
}

// MadeByTrigger tells whether obj, of resource gr, is a stepwise Pipeline that a trigger
// made (it carries LabelTrigger, whatever its value). No trigger matches one: a trigger on
// Pipelines would match the pipelines it makes, make one for each, and for those again,
// without end; two triggers on each other's pipelines would do the same. Ignoring such
// objects, rather than refusing triggers on Pipelines, ends every such loop and keeps
// triggers on the Pipelines people make (and their reruns, which drop the label).
func MadeByTrigger(gr schema.GroupResource, obj metav1.Object) bool {
	_, made := obj.GetLabels()[v1alpha1.LabelTrigger]
	return made && gr == v1alpha1.SchemeGroupVersion.WithResource("pipelines").GroupResource()
}
