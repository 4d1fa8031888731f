package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// TestParameterErrorsFailBeforeAnyHookAlikeForBuiltInsAndPlugins: a step with a missing
// required parameter, a value of the wrong type or one outside an enum fails at once with
// InvalidParameter and a message of one shape, whether its executor is built in (node.drain)
// or served by a plugin (example.greet, whose declarations crossed the plugin protocol);
// no Create was called, so there is nothing to tear down and the pipeline deletes at once.
func TestParameterErrorsFailBeforeAnyHookAlikeForBuiltInsAndPlugins(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	client := stepwiseClient(t)
	tests := []struct {
		name    string
		step    v1alpha1.Step
		wantMsg string
	}{
		{name: "builtin-enum", step: v1alpha1.Step{Name: "drain", Executor: "node.drain",
			With: map[string]string{"node": "nowhere", "policy": "Forse"}},
			wantMsg: `parameter "policy" is "Forse", not one of Fail, Force`},
		{name: "builtin-type", step: v1alpha1.Step{Name: "drain", Executor: "node.drain",
			With: map[string]string{"node": "nowhere", "timeout": "soon"}},
			wantMsg: `parameter "timeout" is "soon", not a duration such as 90s or 10m`},
		{name: "builtin-required", step: v1alpha1.Step{Name: "drain", Executor: "node.drain", With: map[string]string{}},
			wantMsg: `parameter "node" is required`},
		{name: "plugin-required", step: v1alpha1.Step{Name: "greet", Executor: "example.greet", With: map[string]string{}},
			wantMsg: `parameter "name" is required`},
	}
	for _, tt := range tests {
		_, err := client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, recordPipeline(ns, tt.name, "runner", tt.step), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, tt := range tests {
		got := waitPipeline(t, ns, tt.name, time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineFailed })
		s := got.Status.Steps[0]
		assert.Equal(t, tt.wantMsg, s.Message, tt.name)
		ready := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady)
		require.NotNil(t, ready, tt.name)
		assert.Equal(t, contract.ReasonInvalidParameter, ready.Reason, tt.name)
		assert.Equal(t, int32(1), s.Attempts, "%s: not retried", tt.name)
		assert.Nil(t, s.Ran, "%s: Create was never called", tt.name)
	}
}
