package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
)

// Names the operator, kubectl-stepwise and users share, kept beside the types they belong
// to so that a client never needs the engine to read a Pipeline.
const (
	// Finalizer keeps a deleted Pipeline until the teardown of its steps is done.
	Finalizer = "stepwise.dev/teardown"
	// FieldResting is the selectable field of status.resting: the operator lists and
	// watches pipelines selected by it (status.resting= for those it holds whole).
	FieldResting = "status.resting"
	// RetryAnnotation asks for a failed pipeline to be tried again: empty or "true" retries
	// the failed step, a step name retries from that step on. The engine removes it.
	RetryAnnotation = "stepwise.dev/retry"
	// TeardownPolicyAnnotation set to TeardownOrphan on a pipeline makes its deletion skip
	// every teardown that has not run, leaving what its steps created in place: the way out
	// of a teardown that can never succeed. The engine says in a Warning Event which steps it
	// skipped, and the API server's audit log says who set the annotation.
	TeardownPolicyAnnotation = "stepwise.dev/teardown-policy"
	// PlanAsAnnotation on a dry run names the pipeline, in its namespace, whose run it
	// plans: its steps see that pipeline's name, and UID when it exists, so that a plan of
	// an edited copy of a pipeline finds the objects that pipeline owns ("unchanged",
	// "change") rather than objects of another owner. kubectl stepwise plan -f sets it.
	PlanAsAnnotation = "stepwise.dev/plan-as"
	// TeardownOrphan is the value of TeardownPolicyAnnotation that skips the teardown.
	TeardownOrphan = "Orphan"
)

// The names a PipelineTrigger puts on its pipelines, nodes and itself are in
// trigger_wellknown.go.

// Reasons of a pipeline's Ready condition.
const (
	ReasonSucceeded      = "Succeeded"
	ReasonStepRunning    = "StepRunning"
	ReasonStepRetrying   = "StepRetrying"
	ReasonStepFailed     = "StepFailed"
	ReasonSuspended      = "Suspended"
	ReasonDeleting       = "Deleting"
	ReasonTeardownFailed = "TeardownFailed"
	// ReasonArchivePending: a deleted pipeline's teardown is done, and it waits for the
	// archive to take its record before it goes.
	ReasonArchivePending = "ArchivePending"
	// ReasonStatusRejected: the API server refused the status a hook produced; the step
	// fails rather than run the hook again.
	ReasonStatusRejected = "StatusRejected"
	// ReasonStatusTooLarge: the API server refused, for its size, the status a hook
	// produced; the step fails rather than run the hook again.
	ReasonStatusTooLarge = "StatusTooLarge"
	// ReasonStatusOverBudget (an Event): parts of plans were left out of the status to
	// keep the pipeline under the engine's size budget.
	ReasonStatusOverBudget = "StatusOverBudget"
	// ReasonUndecodable: the operator cannot decode the object (a value stored before the
	// schema bounded it, or under a CRD without its rules): it runs nothing until the
	// object is fixed, and every other object is served.
	ReasonUndecodable = "Undecodable"
	// ReasonTemplateTooLarge: the copy of the template and params the status keeps would
	// make the pipeline too large to store; nothing ran.
	ReasonTemplateTooLarge = "TemplateTooLarge"
	// ReasonTemplateNotFound: the pipeline's template does not exist (yet); it starts once
	// the template appears.
	ReasonTemplateNotFound = "TemplateNotFound"
	// ReasonInvalidParameters: the pipeline's params do not fit its template's declared
	// parameters (a required one missing, one it does not declare).
	ReasonInvalidParameters = "InvalidParameters"
	// ReasonTearingDownAfterFailure and ReasonTornDownAfterFailure: a step failed for good
	// under onFailure Teardown, and the steps that ran are being, or have been, torn down.
	// A trigger counts a pipeline torn down after its failure as finished.
	ReasonTearingDownAfterFailure = "TearingDownAfterFailure"
	ReasonTornDownAfterFailure    = "TornDownAfterFailure"
	// ReasonPlanned: a dry run planned every step (spec.dryRun); nothing ran.
	ReasonPlanned = "Planned"
)

// StepsRun are the steps the pipeline runs: its spec's, or, for a pipeline of a template
// (spec.templateRef), the template's steps as its run took them (status.template); none
// before the run took the template.
func (p *Pipeline) StepsRun() []Step {
	if p.Spec.TemplateRef != nil {
		if t := p.Status.Template; t != nil {
			return t.Steps
		}
		return nil
	}
	return p.Spec.Steps
}

// Failed tells whether the pipeline has failed: a step failed and waits for a retry, or
// its teardown is blocked.
func (p *Pipeline) Failed() bool {
	if p.Status.Phase == PipelineFailed {
		return true
	}
	ready := meta.FindStatusCondition(p.Status.Conditions, ConditionReady)
	return ready != nil && ready.Reason == ReasonTeardownFailed
}

// Ready tells whether the pipeline's Ready condition is True.
func (p *Pipeline) Ready() bool {
	return meta.IsStatusConditionTrue(p.Status.Conditions, ConditionReady)
}

// RetryRequested tells whether a retry waits for the operator to pick it up.
func (p *Pipeline) RetryRequested() bool {
	_, ok := p.Annotations[RetryAnnotation]
	return ok
}
