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

// summarizeTeardown derives the phase, current step and Ready condition of a pipeline
// being deleted from its steps.
func (ps *pipelineSync) summarizeTeardown() {
	st := ps.status
	ps.progress()
	st.Phase = v1alpha1.PipelineDeleting
	st.CurrentStep = ""
	r, ok := ps.nextTeardown(false)
	if !ok {
		ps.setReady(metav1.ConditionFalse, v1alpha1.ReasonDeleting, "teardown finished")
		return
	}
	st.CurrentStep = r.s.Name
	if teardownBlocked(r.s) {
		ps.setReady(metav1.ConditionFalse, v1alpha1.ReasonTeardownFailed, fmt.Sprintf(
			"teardown of step %s is blocked: %s; the finalizer stays until it succeeds (annotate %s to retry, or %s=%s to leave what it created)",
			r.s.Name, r.s.Message, v1alpha1.RetryAnnotation, v1alpha1.TeardownPolicyAnnotation, v1alpha1.TeardownOrphan))
		return
	}
	ps.setReady(metav1.ConditionFalse, v1alpha1.ReasonDeleting, withMessage("tearing down step "+r.s.Name, r.s.Message))
}

// summarizeRetired derives the status of a pipeline that tears down the runs the spec no
// longer has before its steps run again, and reports whether there are any.
func (ps *pipelineSync) summarizeRetired() bool {
	r, ok := ps.nextTeardown(true)
	if !ok {
		return false
	}
	st := ps.status
	st.CurrentStep = r.s.Name
	if teardownBlocked(r.s) {
		st.Phase = v1alpha1.PipelineFailed
		ps.setReady(metav1.ConditionFalse, v1alpha1.ReasonTeardownFailed, fmt.Sprintf(
			"teardown of step %s, which the spec no longer has as it ran, is blocked: %s; the steps run again once it succeeds (annotate %s to retry)",
			r.s.Name, r.s.Message, v1alpha1.RetryAnnotation))
		return true
	}
	st.Phase = v1alpha1.PipelineRunning
	ps.setReady(metav1.ConditionFalse, v1alpha1.ReasonDeleting,
		withMessage("tearing down step "+r.s.Name+", which the spec no longer has as it ran", r.s.Message))
	return true
}

// summarize derives the pipeline's phase, current step, progress and Ready condition from
// its steps.
func (ps *pipelineSync) summarize() {
	st := ps.status
	succeeded := ps.progress()
	if ps.summarizeRetired() || ps.summarizeFailureTeardown() {
		return
	}
	switch {
	case ps.failed():
		s := &st.Steps[ps.failedStep()]
		st.Phase = v1alpha1.PipelineFailed
		st.CurrentStep = s.Name
		ps.setReady(metav1.ConditionFalse, v1alpha1.ReasonStepFailed, fmt.Sprintf("step %s failed: %s", s.Name, s.Message))

	case succeeded == len(st.Steps):
		if st.Phase != v1alpha1.PipelineSucceeded {
			ps.normalEvent(v1alpha1.ReasonSucceeded, "All %d steps succeeded", len(st.Steps))
		}
		st.Phase = v1alpha1.PipelineSucceeded
		st.CurrentStep = ""
		if st.CompletionTime == nil {
			st.CompletionTime = ps.timeNow()
		}
		ps.setReady(metav1.ConditionTrue, v1alpha1.ReasonSucceeded, fmt.Sprintf("all %d steps succeeded", len(st.Steps)))

	default:
		s := &st.Steps[ps.currentStep()]
		st.CurrentStep = s.Name
		switch {
		case ps.p.Spec.Suspend:
			st.Phase = v1alpha1.PipelineSuspended
			ps.setReady(metav1.ConditionFalse, v1alpha1.ReasonSuspended, "suspended before step "+s.Name)
		case s.Phase == v1alpha1.StepWaiting:
			st.Phase = v1alpha1.PipelineRunning
			ps.setReady(metav1.ConditionFalse, v1alpha1.ReasonStepRetrying, withMessage("step "+s.Name, s.Message))
		default:
			st.Phase = v1alpha1.PipelineRunning
			ps.setReady(metav1.ConditionFalse, v1alpha1.ReasonStepRunning, withMessage("step "+s.Name, s.Message))
		}
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
	ps.setCondition(&ps.status.Conditions, status, reason, message)
}

// setStepCondition sets a step's Ready condition.
func (ps *pipelineSync) setStepCondition(s *v1alpha1.StepStatus, status metav1.ConditionStatus, reason, message string) {
	ps.setCondition(&s.Conditions, status, reason, message)
}

// setCondition sets a Ready condition; its transition time changes only when its status
// flips.
func (ps *pipelineSync) setCondition(conditions *[]metav1.Condition, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conditions, metav1.Condition{
		Type:               v1alpha1.ConditionReady,
		Status:             status,
		Reason:             reason,
		Message:            contract.Truncate(message, v1alpha1.MaxStepMessageLength),
		ObservedGeneration: ps.p.Generation,
		LastTransitionTime: metav1.NewTime(ps.now()),
	})
}

// mergeOutputs adds a hook's outputs to the step's, refusing outputs that would not fit the
// status: an executor returning that much is a bug no retry fixes.
func mergeOutputs(s *v1alpha1.StepStatus, outputs map[string]string) error {
	if len(outputs) == 0 {
		return nil
	}
	merged := maps.Clone(s.Outputs)
	if merged == nil {
		merged = make(map[string]string, len(outputs))
	}
	maps.Copy(merged, outputs)
	size := 0
	for k, v := range merged {
		size += len(k) + len(v)
	}
	if len(merged) > v1alpha1.MaxStepOutputs || size > v1alpha1.MaxStepOutputsSize {
		return contract.Permanent("OutputsTooLarge", fmt.Errorf(
			"the executor returned %d outputs of %d bytes; a step may keep at most %d outputs of %d bytes",
			len(merged), size, v1alpha1.MaxStepOutputs, v1alpha1.MaxStepOutputsSize))
	}
	s.Outputs = merged
	return nil
}
