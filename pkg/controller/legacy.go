package controller

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// recordLegacyFailure gives a pipeline that an earlier version of the engine was tearing
// down, or had torn down, after a failure the status.failure record it now keeps: those
// versions kept that state only in the Ready condition's reason and message. It reads
// them once, on the first sync after an upgrade, and never again.
func (ps *pipelineSync) recordLegacyFailure() {
	ready := meta.FindStatusCondition(ps.status.Conditions, v1alpha1.ConditionReady)
	if ps.status.Failure != nil || ready == nil || ps.status.Phase != v1alpha1.PipelineFailed {
		return
	}
	var teardown v1alpha1.FailureTeardownPhase
	switch ready.Reason {
	case v1alpha1.ReasonTearingDownAfterFailure:
		teardown = v1alpha1.FailureTearingDown
	case v1alpha1.ReasonTornDownAfterFailure:
		teardown = v1alpha1.FailureTornDown
	default:
		return
	}
	// A condition's message may be longer than the record's bound.
	message := contract.Truncate(strings.TrimPrefix(legacyFailure(ready.Message), "step "+ps.status.CurrentStep+" failed: "),
		v1alpha1.MaxStepMessageLength)
	ps.status.Failure = &v1alpha1.FailureRecord{
		Step: ps.status.CurrentStep, Message: message, Since: ready.LastTransitionTime, Teardown: teardown,
	}
}

// legacyFailure keeps the first part of a Ready message an earlier version wrote, before
// what its teardown appended.
func legacyFailure(msg string) string {
	for _, suffix := range []string{tearingDownSuffix, tornDownSuffix} {
		if before, ok := strings.CutSuffix(msg, suffix); ok {
			return before
		}
	}
	if i := strings.Index(msg, blockedInfix); i >= 0 {
		return msg[:i]
	}
	return msg
}
