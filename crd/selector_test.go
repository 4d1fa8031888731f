package crd

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestAdmissionRefusesSelectorsTheParserWould: a label selector requirement the
// selector's parser refuses (no values with In, values with Exists, a key or a value that
// is no label's) is refused at admission, so that a DrainRule, a NodeBudget or a trigger
// never holds one: a DrainRule's would otherwise fail every drain in the cluster.
func TestAdmissionRefusesSelectorsTheParserWould(t *testing.T) {
	drainRules := newValidator(t, "stepwise.dev_drainrules.yaml")
	triggers := newValidator(t, "stepwise.dev_pipelinetriggers.yaml")
	drainRule := func(expr map[string]any) map[string]any {
		return map[string]any{
			"apiVersion": "stepwise.dev/v1alpha1", "kind": "DrainRule",
			"metadata": map[string]any{"name": "ceph-last"},
			"spec": map[string]any{"behavior": "Drain", "order": int64(10),
				"podSelector": map[string]any{"matchExpressions": []any{expr}}},
		}
	}
	trigger := func(expr map[string]any) map[string]any {
		return map[string]any{
			"apiVersion": "stepwise.dev/v1alpha1", "kind": "PipelineTrigger",
			"metadata": map[string]any{"name": "t", "namespace": "ns"},
			"spec": map[string]any{
				"resource":    map[string]any{"apiVersion": "v1", "kind": "Node"},
				"templateRef": map[string]any{"name": "retire"},
				"selector":    map[string]any{"matchExpressions": []any{expr}},
			},
		}
	}
	const operatorRule = "values are required with In and NotIn, and not allowed with Exists and DoesNotExist"
	for _, tt := range []struct {
		name    string
		expr    map[string]any
		wantErr string // "" admits
	}{
		{"In with values", map[string]any{"key": "app", "operator": "In", "values": []any{"ceph-osd"}}, ""},
		{"NotIn with values", map[string]any{"key": "app.kubernetes.io/name", "operator": "NotIn", "values": []any{"a", "b.c_d-e"}}, ""},
		{"Exists", map[string]any{"key": "app", "operator": "Exists"}, ""},
		{"In without values", map[string]any{"key": "app", "operator": "In"}, operatorRule},
		{"NotIn with an empty list", map[string]any{"key": "app", "operator": "NotIn", "values": []any{}}, operatorRule},
		{"Exists with values", map[string]any{"key": "app", "operator": "Exists", "values": []any{"x"}}, operatorRule},
		{"DoesNotExist with values", map[string]any{"key": "app", "operator": "DoesNotExist", "values": []any{"x"}}, operatorRule},
		{"a key with a space", map[string]any{"key": "my app", "operator": "Exists"}, "matchExpressions[0].key"},
		{"a key with two slashes", map[string]any{"key": "a/b/c", "operator": "Exists"}, "matchExpressions[0].key"},
		{"a key whose name is too long", map[string]any{"key": "example.com/" + strings.Repeat("a", 64), "operator": "Exists"}, "matchExpressions[0].key"},
		{"a value that begins with a dash", map[string]any{"key": "app", "operator": "In", "values": []any{"-x"}}, "matchExpressions[0].values[0]"},
		{"a value with a slash", map[string]any{"key": "app", "operator": "In", "values": []any{"a/b"}}, "matchExpressions[0].values[0]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for kind, errs := range map[string]field.ErrorList{
				"DrainRule": drainRules.validate(t, drainRule(tt.expr)),
				"trigger":   triggers.validate(t, trigger(tt.expr)),
			} {
				if tt.wantErr == "" {
					assert.Empty(t, errs, kind)
					continue
				}
				require.NotEmpty(t, errs, kind)
				assert.Contains(t, errs.ToAggregate().Error(), tt.wantErr, kind)
			}
		})
	}
}
