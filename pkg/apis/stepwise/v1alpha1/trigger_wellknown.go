package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
)

// Names a PipelineTrigger writes, kept beside its type so that kubectl-stepwise, the
// dashboard and users read a trigger's work without the trigger's controller.
const (
	// LabelTrigger names the PipelineTrigger a pipeline was created for: its name, or when
	// longer than a label value may be, its first 57 characters, a dash and a hash of the
	// name (pkg/trigger/rules.LabelValueOf makes it).
	LabelTrigger = "stepwise.dev/trigger"
	// LabelTriggerUID is the UID of the trigger a pipeline was created for. LabelTrigger
	// finds a trigger's pipelines, but a name is not an identity: a trigger deleted and
	// created again under its name, a copy of a pipeline that kept its labels, or two long
	// names that share a hash give the same value. A trigger counts, changes and deletes
	// only the pipelines with its UID.
	LabelTriggerUID = "stepwise.dev/trigger-uid"
	// LabelObjectUID is the UID of the object a trigger's pipeline is for.
	LabelObjectUID = "stepwise.dev/object-uid"
	// AnnotationObject names the object a trigger's pipeline is for: namespace/name, or
	// name for a cluster-scoped object.
	AnnotationObject = "stepwise.dev/object"
	// AnnotationResume is the spec.resume.id of the trigger when it started the pipeline:
	// its failure budget counts the pipelines started since the last resume, which a time
	// kept to the second could not tell apart from those started just before.
	AnnotationResume = "stepwise.dev/resume"
	// LabelNodeBudget names the NodeBudget a trigger's pipeline counts against: every
	// trigger naming the budget counts the unfinished pipelines so labelled, its own and
	// the others'.
	LabelNodeBudget = "stepwise.dev/node-budget"
	// VerbUse is the verb a trigger's ServiceAccount needs on a NodeBudget to name it.
	VerbUse = "use"

	// TaintWaiting is the key of the taint a trigger with spec.taintWaiting puts on the
	// nodes waiting in its queue; its value names the trigger (NAMESPACE.NAME made a label
	// value, pkg/trigger/rules.TaintValueOf).
	TaintWaiting = "stepwise.dev/waiting"
	// TaintWaitingEffect is the effect of TaintWaiting (corev1.TaintEffectPreferNoSchedule,
	// spelt out so that this package needs no k8s.io/api): new pods avoid the node, running
	// ones stay.
	TaintWaitingEffect = "PreferNoSchedule"
	// FinalizerTaints holds a trigger with spec.taintWaiting until its taints are removed.
	FinalizerTaints = "stepwise.dev/waiting-taints"
)

// Reasons of a trigger's Ready condition. Some share their text with a pipeline's reason
// of the same meaning (Suspended, TemplateNotFound, InvalidParameters); each kind has its
// own name for them so that one can change without the other.
const (
	// Ready=True.
	//
	// TriggerReasonActive: the trigger starts pipelines for the objects that match.
	TriggerReasonActive = "Active"
	// TriggerReasonBlocked: every running pipeline waits on a PodDisruptionBudget, and the
	// objects waiting wait for them.
	TriggerReasonBlocked = "Blocked"
	// TriggerReasonSuspended: spec.suspend; the running pipelines go on.
	TriggerReasonSuspended = "Suspended"
	// TriggerReasonOutsideWindow: the maintenance window is closed; the running pipelines
	// go on.
	TriggerReasonOutsideWindow = "OutsideWindow"
	// TriggerReasonCoolingDown: the trigger waits out spec.cooldown since its last start
	// or the last end of one of its pipelines.
	TriggerReasonCoolingDown = "CoolingDown"
	// TriggerReasonNodeBudgetFull: as many nodes are unavailable as the NodeBudget allows;
	// the next node waits for one to come back.
	TriggerReasonNodeBudgetFull = "NodeBudgetFull"
	// TriggerReasonGateClosed: a health gate does not hold; nothing starts until it does.
	TriggerReasonGateClosed = "GateClosed"

	// Ready=False: the trigger starts nothing.
	//
	// TriggerReasonInvalidWindow: the maintenance window cannot be read (schedule, zone,
	// duration).
	TriggerReasonInvalidWindow = "InvalidWindow"
	// TriggerReasonInvalidResource: spec.resource names no kind the API server serves.
	TriggerReasonInvalidResource = "InvalidResource"
	// TriggerReasonResourceNotAllowed: the operator's installer did not let it watch the
	// kind (the operator's --trigger-resources).
	TriggerReasonResourceNotAllowed = "ResourceNotAllowed"
	// TriggerReasonForbidden: the trigger's ServiceAccount may not list and watch the kind.
	TriggerReasonForbidden = "Forbidden"
	// TriggerReasonTemplateNotFound: the template does not exist (yet).
	TriggerReasonTemplateNotFound = "TemplateNotFound"
	// TriggerReasonInvalidSelector: spec.selector or spec.matchFields does not parse.
	TriggerReasonInvalidSelector = "InvalidSelector"
	// TriggerReasonInvalidParameters: a $(object...) reference of spec.params does not
	// parse.
	TriggerReasonInvalidParameters = "InvalidParameters"
	// TriggerReasonPaused: a person paused the trigger (spec.pause); the running pipelines
	// go on.
	TriggerReasonPaused = "Paused"
	// TriggerReasonFailureBudgetSpent: as many pipelines failed as spec.failureBudget
	// allows, since the trigger was created or last resumed; nothing new starts until a
	// person resumes it.
	TriggerReasonFailureBudgetSpent = "FailureBudgetSpent"
	// TriggerReasonGateDeadlineExceeded: a health gate did not hold past its deadline;
	// nothing starts until a person resumes the trigger.
	TriggerReasonGateDeadlineExceeded = "GateDeadlineExceeded"
	// TriggerReasonNodeBudgetNotFound: the NodeBudget the trigger names does not exist.
	TriggerReasonNodeBudgetNotFound = "NodeBudgetNotFound"
)

// Reasons of the Events recorded on a trigger.
const (
	// TriggerReasonWaiting: objects wait for a place in the budget, for the window, for
	// the trigger to be resumed (once while that holds them back), or (a Warning, once per
	// object) for a field its params refer to or for the API server to admit its pipeline.
	// A pipeline's creation has no Event: the pipeline and the status' counts say it.
	TriggerReasonWaiting = "Waiting"
	// TriggerReasonObjectChanged: an object's params changed; its pipeline runs again
	// (Rerun) or keeps its params (Immutable).
	TriggerReasonObjectChanged = "ObjectChanged"
	// TriggerReasonPipelineDeleted: the pipeline of an object that went, or past the
	// history limit, was deleted.
	TriggerReasonPipelineDeleted = "PipelineDeleted"
	// TriggerReasonTaintFailed: a waiting node could not be tainted, or a taint not removed.
	TriggerReasonTaintFailed = "TaintFailed"
	// TriggerReasonPipelineFailed: a pipeline of the trigger failed; the failure budget
	// counts it.
	TriggerReasonPipelineFailed = "PipelineFailed"
	// TriggerReasonResumed: a person resumed the trigger; the failures count from zero.
	TriggerReasonResumed = "Resumed"
)

// Finished tells whether the pipeline no longer counts against its trigger's concurrency:
// it succeeded, or it failed and was torn down after its failure (status.failure says so,
// or, written by an engine before that record, the Ready reason ReasonTornDownAfterFailure:
// it leaves nothing half done). Any other pipeline is unfinished: pending, running,
// suspended, failed and stopped (its object is left half done, as a failed drain leaves a
// node cordoned, until someone retries or deletes it), one whose spec changed since the
// engine last looked at it, and one being deleted (its teardown is work too) until it is
// gone.
func (p *Pipeline) Finished() bool {
	if p.DeletionTimestamp != nil || p.Status.ObservedGeneration < p.Generation {
		return false
	}
	switch p.Status.Phase {
	case PipelineSucceeded:
		return true
	case PipelineFailed:
		if f := p.Status.Failure; f != nil {
			return f.Teardown == FailureTornDown
		}
		ready := meta.FindStatusCondition(p.Status.Conditions, ConditionReady)
		return ready != nil && ready.Reason == ReasonTornDownAfterFailure
	}
	return false
}
