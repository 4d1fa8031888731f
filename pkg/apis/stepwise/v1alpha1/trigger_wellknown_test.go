package v1alpha1

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFinished(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name       string
		status     PipelineStatus
		generation int64
		delete     bool
		want       bool
	}{
		{name: "new", want: false},
		{name: "pending", status: PipelineStatus{Phase: PipelinePending}, want: false},
		{name: "running", status: PipelineStatus{Phase: PipelineRunning}, want: false},
		{name: "suspended", status: PipelineStatus{Phase: PipelineSuspended}, want: false},
		{name: "succeeded", status: PipelineStatus{Phase: PipelineSucceeded}, want: true},
		{name: "failed, stopped", status: PipelineStatus{Phase: PipelineFailed,
			Conditions: []metav1.Condition{{Type: "Ready", Status: "False", Reason: "StepFailed"}}}, want: false},
		{name: "failed, tearing down", status: PipelineStatus{Phase: PipelineFailed,
			Conditions: []metav1.Condition{{Type: "Ready", Status: "False", Reason: "TearingDownAfterFailure"}}}, want: false},
		{name: "failed, torn down", status: PipelineStatus{Phase: PipelineFailed,
			Conditions: []metav1.Condition{{Type: "Ready", Status: "False", Reason: "TornDownAfterFailure"}}}, want: true},
		{name: "failed, torn down (the record)", status: PipelineStatus{Phase: PipelineFailed,
			Failure:    &FailureRecord{Step: "drain", Teardown: FailureTornDown},
			Conditions: []metav1.Condition{{Type: "Ready", Status: "False", Reason: "TornDownAfterFailure"}}}, want: true},
		{name: "failed, tearing down (the record)", status: PipelineStatus{Phase: PipelineFailed,
			Failure:    &FailureRecord{Step: "drain", Teardown: FailureTearingDown},
			Conditions: []metav1.Condition{{Type: "Ready", Status: "False", Reason: "SpecChangeRefused"}}}, want: false},
		{name: "succeeded, being deleted", status: PipelineStatus{Phase: PipelineSucceeded}, delete: true, want: false},
		{name: "deleting", status: PipelineStatus{Phase: PipelineDeleting}, delete: true, want: false},
		{name: "succeeded, spec changed since", generation: 2, status: PipelineStatus{Phase: PipelineSucceeded,
			ObservedGeneration: 1}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Pipeline{Status: tt.status}
			p.Generation = tt.generation
			if tt.delete {
				p.DeletionTimestamp = &now
			}
			assert.Equal(t, tt.want, p.Finished())
		})
	}
	assert.Equal(t, "TornDownAfterFailure", ReasonTornDownAfterFailure, "the engine's reason, by its string")
}

// TestTaintWaitingEffect: the effect is spelt out here so that the API package needs no
// k8s.io/api; it must stay the one the API server knows.
func TestTaintWaitingEffect(t *testing.T) {
	assert.Equal(t, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffect(TaintWaitingEffect))
}
