package deploy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// TestTheAuthorshipPoliciesAgree: the mutating policy writes stepwise.dev/edited-by and
// the validating one refuses any other value, each computing it from its own variables;
// they must compute the same, or every change of a spec is refused.
func TestTheAuthorshipPoliciesAgree(t *testing.T) {
	objs := build(t)
	mutating := decode[admissionregistrationv1.MutatingAdmissionPolicy](t, objs, "MutatingAdmissionPolicy/stepwise-created-by")
	validating := decode[admissionregistrationv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy/stepwise-created-by")
	shared := map[string]string{}
	for _, v := range validating.Spec.Variables {
		shared[v.Name] = v.Expression
	}
	for _, name := range []string{"old", "oldEditors", "changed", "lines", "editors", "hasEditors"} {
		var expr string
		for _, v := range mutating.Spec.Variables {
			if v.Name == name {
				expr = v.Expression
			}
		}
		require.NotEmpty(t, expr, "the mutating policy's variable %s", name)
		assert.Equal(t, expr, shared[name], "variable %s", name)
	}
	assert.Equal(t, mutating.Spec.MatchConstraints.ResourceRules, validating.Spec.MatchConstraints.ResourceRules)
}
