package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

func TestStepReadinessOfEveryPhase(t *testing.T) {
	refused := []v1alpha1.BlockingObject{{Kind: v1alpha1.BlockerPlugin, Name: "vsphere"}}
	tests := []struct {
		name string
		step v1alpha1.StepStatus
		want *stepReadiness // nil: no Ready condition
	}{
		{"pending", v1alpha1.StepStatus{Phase: v1alpha1.StepPending}, nil},
		{"never synced", v1alpha1.StepStatus{}, nil},
		{"pending on a refused plugin", v1alpha1.StepStatus{Phase: v1alpha1.StepPending, BlockedBy: refused, Message: "refused"},
			&stepReadiness{metav1.ConditionFalse, v1alpha1.ReasonPluginRefused, "refused"}},
		{"running", v1alpha1.StepStatus{Phase: v1alpha1.StepRunning, Message: "VM powering off"},
			&stepReadiness{metav1.ConditionFalse, "Running", "VM powering off"}},
		{"running again after a failed attempt", v1alpha1.StepStatus{Phase: v1alpha1.StepRunning, Reason: "Timeout", Message: "attempt 1 of 3 failed"},
			&stepReadiness{metav1.ConditionFalse, "Running", "attempt 1 of 3 failed"}},
		{"waiting to retry", v1alpha1.StepStatus{Phase: v1alpha1.StepWaiting, Reason: "Timeout", Message: "attempt 1 of 3 failed"},
			&stepReadiness{metav1.ConditionFalse, "Timeout", "attempt 1 of 3 failed"}},
		{"failed", v1alpha1.StepStatus{Phase: v1alpha1.StepFailed, Reason: "TicketRejected", Message: "no"},
			&stepReadiness{metav1.ConditionFalse, "TicketRejected", "no"}},
		{"failed, recorded without a reason", v1alpha1.StepStatus{Phase: v1alpha1.StepFailed, Message: "no"},
			&stepReadiness{metav1.ConditionFalse, "Failed", "no"}},
		{"succeeded", v1alpha1.StepStatus{Phase: v1alpha1.StepSucceeded, Message: "VM created"},
			&stepReadiness{metav1.ConditionTrue, reasonStepCompleted, "VM created"}},
		{"planned", v1alpha1.StepStatus{Phase: v1alpha1.StepPlanned, Message: "would create 1"},
			&stepReadiness{metav1.ConditionTrue, v1alpha1.ReasonPlanned, "would create 1"}},
		{"awaiting approval", v1alpha1.StepStatus{Phase: v1alpha1.StepAwaitingApproval, Message: "waiting for 1 approval(s)"},
			&stepReadiness{metav1.ConditionFalse, v1alpha1.ReasonAwaitingApproval, "waiting for 1 approval(s)"}},
		{"deleting", v1alpha1.StepStatus{Phase: v1alpha1.StepDeleting, Message: "VM destroying"},
			&stepReadiness{metav1.ConditionFalse, "Deleting", "VM destroying"}},
		{"torn down", v1alpha1.StepStatus{Phase: v1alpha1.StepDeleted, Message: "VM created"},
			&stepReadiness{metav1.ConditionFalse, "Deleted", "torn down"}},
		{"teardown skipped", v1alpha1.StepStatus{Phase: v1alpha1.StepDeleted, Reason: reasonTeardownSkipped, Message: "teardown skipped"},
			&stepReadiness{metav1.ConditionFalse, reasonTeardownSkipped, "teardown skipped"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := stepReadinessOf(&tt.step)
			if tt.want == nil {
				assert.False(t, ok, "a condition for %+v", got)
				return
			}
			require.True(t, ok)
			assert.Equal(t, *tt.want, got)
		})
	}
}

func TestSetStepReadyKeepsWhatIsUnchangedOrRecordedBeforeReason(t *testing.T) {
	now := metav1.Now()
	old := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Timeout", Message: "no", ObservedGeneration: 1, LastTransitionTime: now}
	ps := &pipelineSync{env: &syncEnv{clock: testingclock.NewFakeClock(now.Time)}, p: &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Generation: 2}}}

	// Failed before StepStatus.Reason: the condition an older operator wrote stays.
	legacy := v1alpha1.StepStatus{Phase: v1alpha1.StepFailed, Message: "no", Conditions: []metav1.Condition{old}}
	ps.setStepReady(&legacy)
	assert.Equal(t, []metav1.Condition{old}, legacy.Conditions)

	// Unchanged: its observedGeneration stays the generation it was derived for.
	same := v1alpha1.StepStatus{Phase: v1alpha1.StepFailed, Reason: "Timeout", Message: "no", Conditions: []metav1.Condition{old}}
	ps.setStepReady(&same)
	assert.Equal(t, []metav1.Condition{old}, same.Conditions)

	// Started again: the condition goes with the run it described.
	reset := v1alpha1.StepStatus{Phase: v1alpha1.StepPending, Conditions: []metav1.Condition{old}}
	ps.setStepReady(&reset)
	assert.Empty(t, reset.Conditions)

	// Changed: set for this generation.
	retried := v1alpha1.StepStatus{Phase: v1alpha1.StepRunning, Reason: "Timeout", Message: "attempt 2", Conditions: []metav1.Condition{old}}
	ps.setStepReady(&retried)
	ready := meta.FindStatusCondition(retried.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, "Running", ready.Reason)
	assert.Equal(t, "attempt 2", ready.Message)
	assert.Equal(t, int64(2), ready.ObservedGeneration)
}
