package controller

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
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
	// reasonRemovedByRetention: retention removes a finished, archived pipeline without a
	// teardown.
	reasonRemovedByRetention = "RemovedByRetention"
	// reasonStepRetired: a step is no longer in the spec as it ran; its teardown runs
	// before the steps run again.
	reasonStepRetired = "StepRetired"
)

// event is an Event on a pipeline: a sync queues it (record) and records it once its
// status is written (emitEvents); syncUndecodable records it at once (recordOn). Each is
// made by one of the functions below, which hold its type, reason and message: a call site
// says which Event and what it speaks of, never how it reads (hack/gen-reference lists
// them, each in the file that records it, in docs/reference/reasons.md).
type event struct {
	// eventType is corev1.EventTypeNormal or corev1.EventTypeWarning.
	eventType       string
	reason, message string
}

// normal and warning make an Event of their type.
func normal(reason, format string, args ...any) event {
	return event{eventType: corev1.EventTypeNormal, reason: reason, message: fmt.Sprintf(format, args...)}
}

func warning(reason, format string, args ...any) event {
	return event{eventType: corev1.EventTypeWarning, reason: reason, message: fmt.Sprintf(format, args...)}
}

// The Events of a step's run.

// stepStarted: step s's first Create hook is called. completeStep drops it when the step
// succeeds in the same sync (see pipelineSync.started).
func stepStarted(s *v1alpha1.StepStatus) event {
	return normal(reasonStepStarted, "Step %q started (%s)", s.Name, s.Executor)
}

// stepRetrying: a hook of step s failed, and is called again after a backoff (s.Message
// says when).
func stepRetrying(s *v1alpha1.StepStatus) event {
	return warning(v1alpha1.ReasonStepRetrying, "Step %q: %s", s.Name, s.Message)
}

// stepFailed: step s failed for good.
func stepFailed(s *v1alpha1.StepStatus) event {
	return warning(v1alpha1.ReasonStepFailed, "Step %q failed: %s", s.Name, s.Message)
}

// pluginRefused: step s waits on a plugin the operator refused, as message says.
func pluginRefused(s *v1alpha1.StepStatus, message string) event {
	return warning(v1alpha1.ReasonPluginRefused, "Step %q waits: %s", s.Name, message)
}

// stepRetired: step s, a retired copy, is no longer in the spec as it ran (s.Executor is
// the executor it ran with).
func stepRetired(s *v1alpha1.StepStatus) event {
	return normal(reasonStepRetired, "Step %q (%s) is no longer in the spec as it ran: its teardown runs before the steps run again",
		s.Name, s.Executor)
}

// The Events of a step's teardown.

// teardownStarted: step s's teardown began.
func teardownStarted(s *v1alpha1.StepStatus) event {
	return normal(reasonTeardownStarted, "Teardown of step %q started", s.Name)
}

// stepTornDown: step s's teardown finished.
func stepTornDown(s *v1alpha1.StepStatus) event {
	return normal(reasonStepTornDown, "Teardown of step %q finished", s.Name)
}

// teardownFailed: step s's teardown failed for good.
func teardownFailed(s *v1alpha1.StepStatus) event {
	return warning(v1alpha1.ReasonTeardownFailed, "Teardown of step %q failed: %s", s.Name, s.Message)
}

// teardownSkipped: step s's teardown cannot run because its namespace is being deleted
// (s.Message says what is left).
func teardownSkipped(s *v1alpha1.StepStatus) event {
	return warning(reasonTeardownSkipped, "Step %q: %s", s.Name, s.Message)
}

// teardownOrphaned: a deleted pipeline's annotation asked to leave what the steps of left
// (each "name (executor)") created.
func teardownOrphaned(left []string) event {
	return warning(reasonTeardownOrphaned, "Teardown skipped as annotation %s=%s asks; what these steps created is left in place: %s",
		v1alpha1.TeardownPolicyAnnotation, v1alpha1.TeardownOrphan, strings.Join(left, ", "))
}

// undecodableOrphaned: the annotation of a deleted pipeline that cannot be decoded asked to
// leave what its steps created.
func undecodableOrphaned() event {
	return warning(reasonTeardownOrphaned, "Teardown skipped as annotation %s=%s asks: the pipeline cannot be decoded",
		v1alpha1.TeardownPolicyAnnotation, v1alpha1.TeardownOrphan)
}

// failureTeardownStarted: step s failed for good under onFailure Teardown; the steps that
// ran are torn down.
func failureTeardownStarted(s *v1alpha1.StepStatus) event {
	return warning(v1alpha1.ReasonTearingDownAfterFailure, "Step %q failed; tearing down the steps that ran", s.Name)
}

// failureTeardownDone: the steps that ran were torn down after the failure f.
func failureTeardownDone(f *v1alpha1.FailureRecord) event {
	return normal(v1alpha1.ReasonTornDownAfterFailure, "The steps that ran were torn down after step %q failed", f.Step)
}

// The Events of approvals.

// awaitingApproval: step s waits for people to approve it (s.Message says who and how).
func awaitingApproval(s *v1alpha1.StepStatus) event {
	return normal(v1alpha1.ReasonAwaitingApproval, "Step %q waits for approval: %s", s.Name, s.Message)
}

// approved: enough people, approvers, approved step s.
func approved(s *v1alpha1.StepStatus, approvers []string) event {
	return normal(v1alpha1.ReasonApproved, "Step %q approved by %s", s.Name, strings.Join(approvers, ", "))
}

// approvalIgnored: Approval a of step s does not count, for why.
func approvalIgnored(s *v1alpha1.StepStatus, a *v1alpha1.Approval, why string) event {
	return warning(v1alpha1.ReasonApprovalIgnored, "Step %q: %s by %s does not count: %s",
		s.Name, strings.ToLower(string(a.Spec.Decision)), a.Spec.User, why)
}

// approvalRejected: the counted decision rec rejected step s.
func approvalRejected(s *v1alpha1.StepStatus, rec *v1alpha1.ApprovalRecord) event {
	return warning(v1alpha1.ReasonApprovalRejected, "Step %q rejected by %s: %s", s.Name, rec.User, rec.Comment)
}

// The Events of retries.

// retryingTeardown: the retry annotation starts step s's blocked teardown over.
func retryingTeardown(s *v1alpha1.StepStatus) event {
	return normal(reasonRetryRequested, "Retrying the teardown of step %q", s.Name)
}

// retryingFromFirst: the retry annotation starts over a pipeline whose steps were torn down
// after a failure.
func retryingFromFirst() event {
	return normal(reasonRetryRequested, "Retrying from the first step")
}

// retryingFrom: the retry annotation runs the steps again from step s.
func retryingFrom(s *v1alpha1.StepStatus) event {
	return normal(reasonRetryRequested, "Retrying from step %q", s.Name)
}

// retryIgnored: the retry annotation names step, which the pipeline does not have.
func retryIgnored(step string) event {
	return warning(reasonRetryIgnored, "Retry names step %q, which the pipeline does not have", step)
}

// The Events of a dry run.

// dryRunPlanned: a dry run planned every one of steps, with warnings warnings in all.
func dryRunPlanned(steps, warnings int) event {
	return normal(v1alpha1.ReasonPlanned, "Planned %d steps, %d warnings; nothing ran", steps, warnings)
}

// planFailed: step s cannot be planned (s.Message says why).
func planFailed(s *v1alpha1.StepStatus) event {
	return warning(reasonPlanFailed, "Step %q cannot be planned: %s", s.Name, s.Message)
}

// The Events of the pipeline's object.

// specChangeRefused: the spec changed after the steps ran, and the pipeline is immutable;
// message says what to do.
func specChangeRefused(message string) event {
	return warning(reasonSpecChangeRefused, "%s", message)
}

// statusOverBudget: shed was left out of the status to keep the pipeline under limit bytes.
func statusOverBudget(shed shedCounts, limit int) event {
	return warning(v1alpha1.ReasonStatusOverBudget, "Left %d plan rows and %d plan warnings out of the status to keep the pipeline under %d bytes",
		shed.Rows, shed.Warnings, limit)
}

// statusRefusedTooLarge: the API server refused the status of steps as too large; they failed.
func statusRefusedTooLarge(steps []string) event {
	return warning(v1alpha1.ReasonStatusTooLarge, "The API server refused the status of steps %s as too large to store: they failed rather than run their hooks again",
		strings.Join(steps, ", "))
}

// undecodable: the operator cannot decode the pipeline, as message says.
func undecodable(message string) event {
	return warning(v1alpha1.ReasonUndecodable, "%s", contract.Truncate(message, v1alpha1.MaxStepMessageLength))
}

// record queues Event e on the pipeline for after the status write.
func (ps *pipelineSync) record(e event) { ps.events = append(ps.events, e) }

// emitEvents records the queued Events (an emptied StepStarted has no reason: its step
// succeeded in the same sync).
func (ps *pipelineSync) emitEvents() {
	if ps.env.recorder != nil {
		for _, e := range ps.events {
			if e.reason != "" {
				e.recordOn(ps.env.recorder, ps.p)
			}
		}
	}
	ps.events, ps.started = nil, nil
	ps.exportSpans()
}

// recordOn records Event e on obj at once.
func (e event) recordOn(r record.EventRecorder, obj runtime.Object) {
	r.Eventf(obj, e.eventType, e.reason, "%s", e.message)
}

// The Event of retention.

// retentionRemoved: retention removes the pipeline, after as long as it asks, without a
// teardown; the archive keeps its record.
func retentionRemoved(after time.Duration) event {
	return normal(reasonRemovedByRetention, "Removed %s after its finished state was archived, as its retention asks; "+
		"nothing was torn down, and the archive keeps its record (state Removed)", after)
}
