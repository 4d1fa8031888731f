package controller

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// tornDownAfterFailure is a pipeline whose step drain failed for good under onFailure
// Teardown, and whose steps that ran were torn down.
func tornDownAfterFailure(t *testing.T) *fixture {
	t.Helper()
	p := newPipeline(stepsOf("cordon", "drain")...)
	p.Spec.OnFailure = v1alpha1.FailureTeardown
	f := newFixture(t, p)
	f.exec.on("drain", v1alpha1.HookCreate, failWith(contract.Permanent("PodDisruptionBudget", errBoom)))
	f.syncUntilIdle("p")
	require.Equal(t, v1alpha1.FailureTornDown, f.get("p").Status.Failure.Teardown)
	f.exec.reset()
	return f
}

// An edit refused under updatePolicy Immutable, then undone, leaves a pipeline torn down
// after its failure as it was: its state is the typed record, which a condition set for
// the edit does not overwrite, so nothing runs again by surprise.
func TestARefusedEditUndoneRunsNothingAfterAFailureTeardown(t *testing.T) {
	f := tornDownAfterFailure(t)
	before := f.get("p").Status.Failure.DeepCopy()

	f.update("p", func(p *v1alpha1.Pipeline) { p.Spec.Params = map[string]string{"edited": "yes"} })
	f.syncUntilIdle("p")
	f.update("p", func(p *v1alpha1.Pipeline) { p.Spec.Params = nil })
	f.syncUntilIdle("p")

	assert.Empty(t, f.exec.Calls(), "no step runs again")
	got := f.get("p")
	assert.Equal(t, before, got.Status.Failure)
	assert.Equal(t, v1alpha1.PipelineFailed, got.Status.Phase)
	assert.Equal(t, v1alpha1.ReasonTornDownAfterFailure, readyCondition(got.Status.Conditions).Reason)
}

// A pipeline an earlier engine tore down after a failure has no status.failure: its state
// is read from its Ready condition once, and kept as the record from then on.
func TestAFailureTeardownOfAnEarlierVersionIsRecorded(t *testing.T) {
	tests := []struct {
		name     string
		teardown v1alpha1.FailureTeardownPhase
		reason   string
		message  string
	}{
		{name: "torn down", teardown: v1alpha1.FailureTornDown, reason: v1alpha1.ReasonTornDownAfterFailure,
			message: "step drain failed: boom" + tornDownSuffix},
		{name: "tearing down", teardown: v1alpha1.FailureTearingDown, reason: v1alpha1.ReasonTearingDownAfterFailure,
			message: "step drain failed: boom" + tearingDownSuffix},
		{name: "tearing down, blocked", teardown: v1alpha1.FailureTearingDown, reason: v1alpha1.ReasonTearingDownAfterFailure,
			message: "step drain failed: boom" + blockedInfix + "cordon is blocked: stuck (annotate stepwise.dev/retry to retry)"},
	}
	long := newPipeline(stepsOf("cordon", "drain")...)
	long.Status = v1alpha1.PipelineStatus{Phase: v1alpha1.PipelineFailed, CurrentStep: "drain", Conditions: []metav1.Condition{{
		Type: v1alpha1.ConditionReady, Status: "False", Reason: v1alpha1.ReasonTornDownAfterFailure,
		Message: "step drain failed: " + strings.Repeat("x", 30000) + tornDownSuffix,
	}}}
	assert.LessOrEqual(t, len((&Controller{}).newPipelineSync(long).status.Failure.Message), v1alpha1.MaxStepMessageLength,
		"a condition's message may be longer than the record's bound")

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPipeline(stepsOf("cordon", "drain")...)
			p.Status = v1alpha1.PipelineStatus{Phase: v1alpha1.PipelineFailed, CurrentStep: "drain"}
			p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: "False", Reason: tt.reason, Message: tt.message}}
			ps := (&Controller{}).newPipelineSync(p)
			require.NotNil(t, ps.status.Failure)
			assert.Equal(t, "drain", ps.status.Failure.Step)
			assert.Equal(t, "boom", ps.status.Failure.Message)
			assert.Equal(t, tt.teardown, ps.status.Failure.Teardown)
		})
	}
}

// An edit under updatePolicy Rerun of a pipeline torn down after its failure is a new
// run: its steps run again, and the failure is the last run's, not this one's.
func TestAnEditUnderRerunRunsAgainAfterAFailureTeardown(t *testing.T) {
	f := tornDownAfterFailure(t)
	f.update("p", func(p *v1alpha1.Pipeline) {
		p.Spec.UpdatePolicy = v1alpha1.UpdateRerun
		p.Spec.Params = map[string]string{"edited": "yes"}
	})
	f.exec.on("drain", v1alpha1.HookCreate, done)
	f.syncUntilIdle("p")

	got := f.get("p")
	assert.Contains(t, f.exec.Calls(), "drain/Create#1", "the steps run again")
	assert.Nil(t, got.Status.Failure)
	assert.Equal(t, v1alpha1.PipelineSucceeded, got.Status.Phase)
}
