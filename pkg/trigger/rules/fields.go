package rules

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/objectref"
)

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
		path, err := objectref.ParsePath(r.Field)
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

// Paths are the fields the requirements read.
func (m FieldMatcher) Paths() [][]string {
	out := make([][]string, 0, len(m))
	for _, r := range m {
		out = append(out, r.path)
	}
	return out
}

// Matches tells whether obj meets every requirement. A field that is not a string, number
// or bool is in no set of values.
func (m FieldMatcher) Matches(obj *unstructured.Unstructured) bool {
	for _, r := range m {
		v, found := objectref.Lookup(obj, r.path)
		text, kind := objectref.ScalarText(v)
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
