package rules

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
)

func TestMatchFields(t *testing.T) {
	node := triggertest.Node("node-1", 0, nil)
	node.Object["spec"] = map[string]any{
		"providerID": "cloud://node-1", "unschedulable": true, "podCIDRs": []any{"10.0.0.0/24"},
	}
	node.SetAnnotations(map[string]string{"example.com/pool": "blue"})
	req := func(field string, op v1alpha1.FieldOperator, values ...string) v1alpha1.FieldRequirement {
		return v1alpha1.FieldRequirement{Field: field, Operator: op, Values: values}
	}
	tests := []struct {
		name string
		reqs []v1alpha1.FieldRequirement
		want bool
	}{
		{name: "none", want: true},
		{name: "In a string", reqs: []v1alpha1.FieldRequirement{req("spec.providerID", v1alpha1.FieldIn, "x", "cloud://node-1")}, want: true},
		{name: "In a bool as text", reqs: []v1alpha1.FieldRequirement{req("spec.unschedulable", v1alpha1.FieldIn, "true")}, want: true},
		{name: "not In", reqs: []v1alpha1.FieldRequirement{req("spec.providerID", v1alpha1.FieldIn, "cloud://node-2")}},
		{name: "In, field missing", reqs: []v1alpha1.FieldRequirement{req("spec.taints", v1alpha1.FieldIn, "")}},
		{name: "In, a list is in no set", reqs: []v1alpha1.FieldRequirement{req("spec.podCIDRs", v1alpha1.FieldIn, "[10.0.0.0/24]")}},
		{name: "NotIn", reqs: []v1alpha1.FieldRequirement{req("spec.providerID", v1alpha1.FieldNotIn, "cloud://node-2")}, want: true},
		{name: "NotIn, among the values", reqs: []v1alpha1.FieldRequirement{req("spec.unschedulable", v1alpha1.FieldNotIn, "true")}},
		{name: "NotIn, field missing", reqs: []v1alpha1.FieldRequirement{req("spec.taints", v1alpha1.FieldNotIn, "x")}, want: true},
		{name: "Exists", reqs: []v1alpha1.FieldRequirement{req("spec.podCIDRs", v1alpha1.FieldExists)}, want: true},
		{name: "Exists, missing", reqs: []v1alpha1.FieldRequirement{req("spec.taints", v1alpha1.FieldExists)}},
		{name: "Exists, through a string", reqs: []v1alpha1.FieldRequirement{req("spec.providerID.x", v1alpha1.FieldExists)}},
		{name: "DoesNotExist", reqs: []v1alpha1.FieldRequirement{req("spec.taints", v1alpha1.FieldDoesNotExist)}, want: true},
		{name: "DoesNotExist, present", reqs: []v1alpha1.FieldRequirement{req("spec.unschedulable", v1alpha1.FieldDoesNotExist)}},
		{name: "bracketed key", reqs: []v1alpha1.FieldRequirement{req("metadata.annotations['example.com/pool']", v1alpha1.FieldIn, "blue")}, want: true},
		{name: "all must hold", reqs: []v1alpha1.FieldRequirement{
			req("spec.unschedulable", v1alpha1.FieldExists), req("spec.providerID", v1alpha1.FieldIn, "other"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseMatchFields(tt.reqs)
			require.NoError(t, err)
			assert.Equal(t, tt.want, m.Matches(node))
		})
	}
}

func TestMatchFieldsErrors(t *testing.T) {
	tests := []struct {
		name    string
		req     v1alpha1.FieldRequirement
		wantErr string
	}{
		{name: "bad path", req: v1alpha1.FieldRequirement{Field: "spec..x", Operator: v1alpha1.FieldExists},
			wantErr: "spec.matchFields[1].field: "},
		{name: "In without values", req: v1alpha1.FieldRequirement{Field: "spec.x", Operator: v1alpha1.FieldIn},
			wantErr: "spec.matchFields[1]: In needs values"},
		{name: "Exists with values", req: v1alpha1.FieldRequirement{Field: "spec.x", Operator: v1alpha1.FieldExists, Values: []string{"a"}},
			wantErr: "spec.matchFields[1]: Exists takes no values"},
		{name: "unknown operator", req: v1alpha1.FieldRequirement{Field: "spec.x", Operator: "Gt", Values: []string{"1"}},
			wantErr: `spec.matchFields[1].operator: "Gt" is not In, NotIn, Exists or DoesNotExist`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok := v1alpha1.FieldRequirement{Field: "spec.y", Operator: v1alpha1.FieldExists}
			_, err := ParseMatchFields([]v1alpha1.FieldRequirement{ok, tt.req})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}
