package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// The reasons of the Events the engine records on a Pipeline, beside those of
// pkg/apis/stepwise/v1alpha1 that a client also reads (StepFailed, StepRetrying,
// TeardownFailed, AwaitingApproval, Approved, ...).
const (
	// reasonStepStarted: a step's first hook was called (dropped when the step succeeds
	// in the same sync: the status says it).
	reasonStepStarted = "StepStarted"
	// reasonStepCompleted: the Ready reason of a step whose hooks all succeeded.
	reasonStepCompleted = "Completed"
	// reasonTeardownStarted: a step's teardown began.
	reasonTeardownStarted = "TeardownStarted"
	// reasonStepTornDown: a step's teardown finished.
	reasonStepTornDown = "StepTornDown"
	// reasonTeardownSkipped: a step's teardown cannot run because its namespace is being
	// deleted; what it created outside the namespace is left (also the step's reason).
	reasonTeardownSkipped = "TeardownSkipped"
	// reasonTeardownOrphaned: a deleted pipeline's annotation asked to leave what its
	// steps created.
	reasonTeardownOrphaned = "TeardownOrphaned"
	// reasonPlanFailed: a dry run cannot plan a step.
	reasonPlanFailed = "PlanFailed"
	// reasonRetryRequested: the retry annotation asked to run again.
	reasonRetryRequested = "RetryRequested"
	// reasonRetryIgnored: the retry annotation names a step the pipeline does not have.
	reasonRetryIgnored = "RetryIgnored"
	// reasonStepRetired: a step is no longer in the spec as it ran; its teardown runs
	// before the steps run again.
	reasonStepRetired = "StepRetired"
)

// event is an Event a sync records once its status is written.
type event struct {
	// eventType is corev1.EventTypeNormal or corev1.EventTypeWarning.
	eventType       string
	reason, message string
}

// normalEvent and warningEvent queue an Event on the pipeline for after the status write.
func (ps *pipelineSync) normalEvent(reason, format string, args ...any) {
	ps.events = append(ps.events, event{eventType: corev1.EventTypeNormal, reason: reason, message: fmt.Sprintf(format, args...)})
}

func (ps *pipelineSync) warningEvent(reason, format string, args ...any) {
	ps.events = append(ps.events, event{eventType: corev1.EventTypeWarning, reason: reason, message: fmt.Sprintf(format, args...)})
}

// emitEvents records the queued Events (an emptied StepStarted has no reason: its step
// succeeded in the same sync).
func (ps *pipelineSync) emitEvents() {
	if ps.env.recorder != nil {
		for _, e := range ps.events {
			if e.reason != "" {
				ps.env.recorder.Eventf(ps.p, e.eventType, e.reason, "%s", e.message)
			}
		}
	}
	ps.events, ps.started = nil, nil
	ps.exportSpans()
}
