package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// TestAStepWaitsOnARefusedPlugin: a step whose executor a refused plugin would serve
// waits, not fails: its condition, the pipeline's Ready condition, the pipeline's
// blockedBy and one Event name the plugin and why it was refused, and nothing is due;
// once an operator serves the executor (restarted with a build that verifies), the step
// runs.
func TestAStepWaitsOnARefusedPlugin(t *testing.T) {
	f := newFixture(t, newPipeline(
		v1alpha1.Step{Name: "a", Executor: "test.record"},
		v1alpha1.Step{Name: "b", Executor: "acme.hello"},
	))
	refusal := executor.Refusal{Plugin: "stepwise-plugin-acme", Reason: v1alpha1.PluginSignedByAnother,
		Message: "its signature is refused (SignedByAnother): not signed by the policy's public key"}
	registry, ok := f.c.executors.(*executor.Registry)
	require.True(t, ok)
	registry.Refuse(refusal)

	f.syncUntilIdle("p")
	for range 3 {
		assert.Zero(t, f.sync("p"), "nothing is due while the plugin is refused")
	}

	got := f.get("p")
	assert.Equal(t, v1alpha1.PipelineRunning, got.Status.Phase)
	assert.Equal(t, v1alpha1.StepSucceeded, stepStatus(got, "a").Phase)
	b := stepStatus(got, "b")
	assert.Equal(t, v1alpha1.StepPending, b.Phase, "the step never began")
	assert.Equal(t, []v1alpha1.BlockingObject{{Kind: v1alpha1.BlockerPlugin, Name: "stepwise-plugin-acme"}}, b.BlockedBy)
	assert.Equal(t, v1alpha1.ReasonPluginRefused, readyCondition(b.Conditions).Reason)
	assert.Contains(t, b.Message, "stepwise-plugin-acme, which the operator refused (SignedByAnother): ")
	ready := readyCondition(got.Status.Conditions)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, v1alpha1.ReasonPluginRefused, ready.Reason)
	require.Len(t, got.Status.BlockedBy, 1)
	blocker := got.Status.BlockedBy[0]
	assert.Equal(t, v1alpha1.BlockerPlugin, blocker.Kind)
	assert.Equal(t, "stepwise-plugin-acme", blocker.Name)
	assert.Equal(t, "b", blocker.Step)
	assert.Contains(t, blocker.Unblock, "kubectl stepwise executors")
	events := f.events()
	assert.Equal(t, 1, countOf(events, "Warning "+v1alpha1.ReasonPluginRefused), "one Event, not one a sync: %v", events)
	assert.Zero(t, countOf(events, "Warning StepFailed"), events)

	// An operator that serves the plugin's executor runs the step.
	g := f.restart()
	served := executor.NewRegistry()
	require.NoError(t, served.Register(g.exec, newRecordingExecutor("acme.hello")))
	g.c.executors = served
	g.syncUntilIdle("p")
	got = g.get("p")
	assert.Equal(t, v1alpha1.PipelineSucceeded, got.Status.Phase)
	assert.Empty(t, stepStatus(got, "b").BlockedBy)
	assert.Empty(t, got.Status.BlockedBy)
}

func countOf(items []string, item string) int {
	n := 0
	for _, i := range items {
		if i == item {
			n++
		}
	}
	return n
}
