package controller

import (
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// progress counts the succeeded steps into the status' progress, and returns the count.
func (ps *pipelineSync) progress() int {
	st := ps.status
	succeeded := 0
	for i := range st.Steps {
		if st.Steps[i].Phase == v1alpha1.StepSucceeded {
			succeeded++
		}
	}
	st.Progress = fmt.Sprintf("%d/%d", succeeded, len(st.Steps))
	return succeeded
}

// summarize derives the pipeline's phase, current step, progress and Ready condition from
// its typed state: the spec, the working status, and what held the run back in this sync.
// It is the one place they are set, after every handler.
func (ps *pipelineSync) summarize() {
	st := ps.status
	var r readiness
	switch {
	case ps.held != nil: // the run did not start: its steps and progress are as they were
		r = notReady(ps.held.phase, st.CurrentStep, ps.held.reason, ps.held.message)
	case ps.p.Spec.DryRun:
		r = ps.planReadiness()
	case ps.p.DeletionTimestamp != nil:
		ps.progress()
		r = ps.teardownReadiness()
	default:
		r = ps.runReadiness(ps.progress())
	}
	switch r.phase {
	case v1alpha1.PipelinePlanned:
		st.CompletionTime = ps.timeNow()
	case v1alpha1.PipelineFailed:
		if st.Phase != v1alpha1.PipelineFailed {
			ps.pipelineEnded(r.phase, r.message)
		}
	case v1alpha1.PipelineSucceeded:
		if st.Phase != v1alpha1.PipelineSucceeded {
			ps.pipelineEnded(r.phase, r.message) // no Event: the status says it
		}
		if st.CompletionTime == nil {
			st.CompletionTime = ps.timeNow()
		}
	}
	st.Phase, st.CurrentStep = r.phase, r.current
	ps.setReady(r.status, r.reason, r.message)
	ps.setProgress(r)
	st.BlockedBy = ps.blockers(r)
	for _, steps := range [][]v1alpha1.StepStatus{st.Steps, st.RetiredSteps} {
		for i := range steps {
			ps.setStepReady(&steps[i])
		}
	}
}

// stepReadiness is a step's Ready condition, derived from its typed state: the handlers
// set a step's phase, message and reason, and summarize sets every step's condition from
// them.
type stepReadiness struct {
	status          metav1.ConditionStatus
	reason, message string
}

// stepReadinessOf is the Ready condition of step s, or false when it has none: a step that
// has not started (or starts again) says nothing beyond its phase.
func stepReadinessOf(s *v1alpha1.StepStatus) (stepReadiness, bool) {
	if waitsOnRefusedPlugin(s) {
		return stepReadiness{metav1.ConditionFalse, v1alpha1.ReasonPluginRefused, s.Message}, true
	}
	switch s.Phase {
	case v1alpha1.StepPending, "":
		return stepReadiness{}, false
	case v1alpha1.StepSucceeded:
		return stepReadiness{metav1.ConditionTrue, reasonStepCompleted, s.Message}, true
	case v1alpha1.StepPlanned:
		return stepReadiness{metav1.ConditionTrue, v1alpha1.ReasonPlanned, s.Message}, true
	case v1alpha1.StepAwaitingApproval:
		return stepReadiness{metav1.ConditionFalse, v1alpha1.ReasonAwaitingApproval, s.Message}, true
	case v1alpha1.StepDeleted:
		if s.Reason != "" { // its teardown was skipped
			return stepReadiness{metav1.ConditionFalse, s.Reason, s.Message}, true
		}
		// The step's message stays what its run said; the condition says it is gone.
		return stepReadiness{metav1.ConditionFalse, string(v1alpha1.StepDeleted), "torn down"}, true
	case v1alpha1.StepFailed, v1alpha1.StepWaiting:
		if s.Reason != "" {
			return stepReadiness{metav1.ConditionFalse, s.Reason, s.Message}, true
		}
	}
	// Running or deleting (the phase is the reason), or failed or waiting as recorded
	// before StepStatus.Reason was.
	return stepReadiness{metav1.ConditionFalse, string(s.Phase), s.Message}, true
}

// setStepReady sets step s's Ready condition as its state says. A step failed or waiting
// as recorded by an operator without StepStatus.Reason keeps the condition it has, so an
// upgrade rewrites no finished pipeline.
func (ps *pipelineSync) setStepReady(s *v1alpha1.StepStatus) {
	r, ok := stepReadinessOf(s)
	switch {
	case !ok:
		meta.RemoveStatusCondition(&s.Conditions, v1alpha1.ConditionReady)
		return
	case s.Reason == "" && (s.Phase == v1alpha1.StepFailed || s.Phase == v1alpha1.StepWaiting) &&
		meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady) != nil:
		return
	}
	if c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady); c != nil &&
		c.Status == r.status && c.Reason == r.reason && c.Message == contract.Truncate(r.message, v1alpha1.MaxStepMessageLength) {
		return // unchanged: its observedGeneration stays the generation it was derived for
	}
	ps.setCondition(&s.Conditions, v1alpha1.ConditionReady, r.status, r.reason, r.message)
}

// setProgress sets Reconciling or Stalled beside Ready, or neither, as kstatus reads them:
// a GitOps apply waiting on the pipeline ends when it succeeded (Current) or failed
// (Failed) and waits while it runs, retries, is suspended or waits for a person or its
// template (InProgress).
func (ps *pipelineSync) setProgress(r readiness) {
	stalled := r.status != metav1.ConditionTrue &&
		(r.phase == v1alpha1.PipelineFailed || r.reason == v1alpha1.ReasonTeardownFailed || r.reason == v1alpha1.ReasonUndecodable)
	reconciling := r.status != metav1.ConditionTrue && !stalled
	for _, c := range []struct {
		kind string
		set  bool
	}{{v1alpha1.ConditionStalled, stalled}, {v1alpha1.ConditionReconciling, reconciling}} {
		if !c.set {
			// Removed rather than False: a finished pipeline, the many a cluster keeps,
			// stores neither.
			meta.RemoveStatusCondition(&ps.status.Conditions, c.kind)
			continue
		}
		ps.setCondition(&ps.status.Conditions, c.kind, metav1.ConditionTrue, r.reason, r.message)
	}
}

// readiness is what summarize derives: the pipeline's phase, current step and Ready
// condition.
type readiness struct {
	phase   v1alpha1.PipelinePhase
	current string
	status  metav1.ConditionStatus
	reason  string
	message string
}

func notReady(phase v1alpha1.PipelinePhase, current, reason, message string) readiness {
	return readiness{phase: phase, current: current, status: metav1.ConditionFalse, reason: reason, message: message}
}

// planReadiness is a dry run's: Planned, or Failed at the first step that cannot be
// planned.
func (ps *pipelineSync) planReadiness() readiness {
	if i := ps.failedStep(); i >= 0 {
		s := &ps.status.Steps[i]
		return notReady(v1alpha1.PipelineFailed, s.Name, v1alpha1.ReasonStepFailed, fmt.Sprintf("step %s cannot be planned: %s", s.Name, s.Message))
	}
	return readiness{phase: v1alpha1.PipelinePlanned, status: metav1.ConditionTrue, reason: v1alpha1.ReasonPlanned,
		message: fmt.Sprintf("planned %d steps, %d warnings; nothing ran (dry run)", len(ps.status.Steps), ps.planWarnings())}
}

// teardownReadiness is a deleted pipeline's: the step it tears down, or blocks on.
func (ps *pipelineSync) teardownReadiness() readiness {
	r, ok := ps.nextTeardown(false)
	switch {
	case !ok && ps.archiveErr != nil:
		return notReady(v1alpha1.PipelineDeleting, "", v1alpha1.ReasonArchivePending, fmt.Sprintf(
			"teardown finished; the pipeline goes once the archive has its record, tried again with backoff: %s",
			contract.Truncate(ps.archiveErr.Error(), 512)))
	case !ok:
		return notReady(v1alpha1.PipelineDeleting, "", v1alpha1.ReasonDeleting, "teardown finished")
	case teardownBlocked(r.s):
		return notReady(v1alpha1.PipelineDeleting, r.s.Name, v1alpha1.ReasonTeardownFailed, fmt.Sprintf(
			"teardown of step %s is blocked: %s; the finalizer stays until it succeeds (annotate %s to retry, or %s=%s to leave what it created)",
			r.s.Name, r.s.Message, v1alpha1.RetryAnnotation, v1alpha1.TeardownPolicyAnnotation, v1alpha1.TeardownOrphan))
	default:
		return notReady(v1alpha1.PipelineDeleting, r.s.Name, v1alpha1.ReasonDeleting, withMessage("tearing down step "+r.s.Name, r.s.Message))
	}
}

// runReadiness is the readiness of a pipeline that is not deleted, with succeeded steps
// succeeded; a refused edit says so over whatever the last run shows.
func (ps *pipelineSync) runReadiness(succeeded int) readiness {
	r := ps.lastRunReadiness(succeeded)
	if ps.status.RefusedSpecHash != "" {
		r.phase, r.status, r.reason, r.message = v1alpha1.PipelineFailed, metav1.ConditionFalse, reasonSpecChangeRefused, ps.refusedEditMessage()
	}
	return r
}

// lastRunReadiness is the readiness of the spec's run: the retired runs it tears down
// first, the teardown after its failure, or its steps.
func (ps *pipelineSync) lastRunReadiness(succeeded int) readiness {
	st := ps.status
	if r, ok := ps.nextTeardown(true); ok {
		if teardownBlocked(r.s) {
			return notReady(v1alpha1.PipelineFailed, r.s.Name, v1alpha1.ReasonTeardownFailed, fmt.Sprintf(
				"teardown of step %s, which the spec no longer has as it ran, is blocked: %s; the steps run again once it succeeds (annotate %s to retry)",
				r.s.Name, r.s.Message, v1alpha1.RetryAnnotation))
		}
		return notReady(v1alpha1.PipelineRunning, r.s.Name, v1alpha1.ReasonDeleting,
			withMessage("tearing down step "+r.s.Name+", which the spec no longer has as it ran", r.s.Message))
	}
	if f := st.Failure; f != nil {
		failure := failedStepMessage(f)
		r, ok := ps.nextTeardown(false)
		switch {
		case !ok:
			return notReady(v1alpha1.PipelineFailed, f.Step, v1alpha1.ReasonTornDownAfterFailure, failure+tornDownSuffix)
		case teardownBlocked(r.s):
			return notReady(v1alpha1.PipelineFailed, f.Step, v1alpha1.ReasonTearingDownAfterFailure, fmt.Sprintf(
				"%s"+blockedInfix+"%s is blocked: %s (annotate %s to retry)", failure, r.s.Name, r.s.Message, v1alpha1.RetryAnnotation))
		default:
			return notReady(v1alpha1.PipelineFailed, f.Step, v1alpha1.ReasonTearingDownAfterFailure, failure+tearingDownSuffix)
		}
	}
	if i := ps.failedStep(); i >= 0 {
		s := &st.Steps[i]
		return notReady(v1alpha1.PipelineFailed, s.Name, v1alpha1.ReasonStepFailed, fmt.Sprintf("step %s failed: %s", s.Name, s.Message))
	}
	if succeeded == len(st.Steps) {
		return readiness{phase: v1alpha1.PipelineSucceeded, status: metav1.ConditionTrue, reason: v1alpha1.ReasonSucceeded,
			message: fmt.Sprintf("all %d steps succeeded", len(st.Steps))}
	}
	s := &st.Steps[ps.currentStep()]
	switch {
	case ps.p.Spec.Suspend:
		return notReady(v1alpha1.PipelineSuspended, s.Name, v1alpha1.ReasonSuspended, "suspended before step "+s.Name)
	case waitsOnRefusedPlugin(s):
		return notReady(v1alpha1.PipelineRunning, s.Name, v1alpha1.ReasonPluginRefused, withMessage("step "+s.Name, s.Message))
	case s.Phase == v1alpha1.StepWaiting:
		return notReady(v1alpha1.PipelineRunning, s.Name, v1alpha1.ReasonStepRetrying, withMessage("step "+s.Name, s.Message))
	case s.Phase == v1alpha1.StepAwaitingApproval:
		return notReady(v1alpha1.PipelineRunning, s.Name, v1alpha1.ReasonAwaitingApproval, withMessage("step "+s.Name, s.Message))
	default:
		return notReady(v1alpha1.PipelineRunning, s.Name, v1alpha1.ReasonStepRunning, withMessage("step "+s.Name, s.Message))
	}
}

func withMessage(prefix, message string) string {
	if message == "" {
		return prefix
	}
	return prefix + ": " + message
}

// setReady sets the pipeline's Ready condition.
func (ps *pipelineSync) setReady(status metav1.ConditionStatus, reason, message string) {
	ps.setCondition(&ps.status.Conditions, v1alpha1.ConditionReady, status, reason, message)
}

// setCondition sets a condition; its transition time changes only when its status flips.
func (ps *pipelineSync) setCondition(conditions *[]metav1.Condition, kind string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conditions, metav1.Condition{
		Type:               kind,
		Status:             status,
		Reason:             reason,
		Message:            contract.Truncate(message, v1alpha1.MaxStepMessageLength),
		ObservedGeneration: ps.p.Generation,
		LastTransitionTime: metav1.NewTime(ps.now()),
	})
}

// mergeCreated adds what a hook created to the step's record. What it already holds
// stays, so that teardown still sees what an earlier call created.
func mergeCreated(s *v1alpha1.StepStatus, created map[string]string) error {
	merged, err := mergeBounded(s.Created, created, contract.CheckCreated, "CreatedTooLarge")
	if err == nil {
		s.Created = merged
	}
	return err
}

// mergeOutputs adds a hook's outputs to the step's.
func mergeOutputs(s *v1alpha1.StepStatus, outputs map[string]string) error {
	merged, err := mergeBounded(s.Outputs, outputs, contract.CheckOutputs, "OutputsTooLarge")
	if err == nil {
		s.Outputs = merged
	}
	return err
}

// mergeBounded returns base with more merged in, refusing a map that would not fit the
// status (check): an executor returning that much is a bug no retry fixes.
func mergeBounded(base, more map[string]string, check func(map[string]string) error, reason string) (map[string]string, error) {
	if len(more) == 0 {
		return base, nil
	}
	merged := maps.Clone(base)
	if merged == nil {
		merged = make(map[string]string, len(more))
	}
	maps.Copy(merged, more)
	if err := check(merged); err != nil {
		return nil, contract.Permanent(reason, fmt.Errorf("the executor returned %w", err))
	}
	return merged, nil
}
