package v1alpha1

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Names of approvals the operator, kubectl-stepwise, the dashboard and the install's
// admission policies share.
const (
	// VerbApprove is the verb a user needs on a pipeline (resource pipelines, its name) to
	// approve or reject its steps: a custom verb, as Kubernetes checks escalate and bind.
	VerbApprove = "approve"
	// AnnotationCreatedBy is the user who created a Pipeline, PipelineTemplate or
	// PipelineTrigger, as the API server authenticated them: the install's
	// MutatingAdmissionPolicy stamps it at creation, and its ValidatingAdmissionPolicy
	// refuses any other value or a change. Four eyes refuses their approvals.
	AnnotationCreatedBy = "stepwise.dev/created-by"
	// AnnotationEditedBy are the users who changed the spec of a Pipeline, PipelineTemplate
	// or PipelineTrigger since its creation (or its ownerReferences, or its LabelTrigger or
	// LabelTriggerUID: what ties a pipeline to a trigger), one a line, each once, as the API
	// server authenticated them: the install's MutatingAdmissionPolicy adds the requester
	// on every such update, and its ValidatingAdmissionPolicy refuses any other value. A
	// line left empty says that some are not named (more than MaxEditors, or changes
	// before the install recorded them). Four eyes refuses their approvals too.
	AnnotationEditedBy = "stepwise.dev/edited-by"
	// MaxEditors is how many users AnnotationEditedBy names at most; one more marks it
	// incomplete, which refuses every approval under four eyes.
	MaxEditors = 16
)

// Reasons of approvals: of a step's and a pipeline's Ready condition, and of Events.
const (
	// ReasonAwaitingApproval: the step waits for people to approve it.
	ReasonAwaitingApproval = "AwaitingApproval"
	// ReasonApproved (an Event): enough people approved; the step runs.
	ReasonApproved = "Approved"
	// ReasonApprovalRejected: someone who may approve the step rejected it.
	ReasonApprovalRejected = "ApprovalRejected"
	// ReasonApprovalDeadlineExceeded: the step was not approved before its deadline.
	ReasonApprovalDeadlineExceeded = "ApprovalDeadlineExceeded"
	// ReasonApprovalIgnored (an Event): an Approval did not count (its user may not
	// approve the step; under four eyes, made or changed the pipeline, the template its run
	// took or the trigger that created it, or one of those does not record who did).
	ReasonApprovalIgnored = "ApprovalIgnored"
)

// AwaitingApproval returns the steps of p that wait for approval now, in order.
func (p *Pipeline) AwaitingApproval() []StepStatus {
	var out []StepStatus
	for _, s := range p.Status.Steps {
		if s.Phase == StepAwaitingApproval && s.Approval != nil {
			out = append(out, s)
		}
	}
	return out
}

// maxUserLength is the longest user name Authorship keeps (its schema's bound); a longer
// one makes the record incomplete rather than cut, which would name someone else.
const maxUserLength = 1024

// EditorsOf reads AnnotationEditedBy: the users it names, and whether it names everyone
// who changed the object (no line left empty).
func EditorsOf(annotations map[string]string) (users []string, whole bool) {
	v, ok := annotations[AnnotationEditedBy]
	if !ok {
		return nil, true
	}
	whole = true
	for _, u := range strings.Split(v, "\n") {
		if u == "" || len(u) > maxUserLength || len(users) == MaxEditors {
			whole = false
			continue
		}
		if !slices.Contains(users, u) {
			users = append(users, u)
		}
	}
	return users, whole
}

// AuthorshipOf is who created obj, of kind, and who changed it since, by what the
// install's admission policies recorded on it. An object whose generation says its spec
// changed, without AnnotationEditedBy, was changed before they recorded changes.
func AuthorshipOf(kind string, obj metav1.Object) Authorship {
	a := Authorship{Kind: kind, Name: obj.GetName(), UID: string(obj.GetUID())}
	annotations := obj.GetAnnotations()
	editors, whole := EditorsOf(annotations)
	_, recorded := annotations[AnnotationEditedBy]
	a.EditedBy = editors
	if !whole || (!recorded && obj.GetGeneration() > 1) {
		a.Unrecorded = AuthorsEditorsUnknown
	}
	switch creator := annotations[AnnotationCreatedBy]; {
	case creator == "" || len(creator) > maxUserLength:
		a.Unrecorded = AuthorsCreatorUnknown
	default:
		a.CreatedBy = creator
	}
	return a
}

// Controls tells whether p is a pipeline of trigger t, by t's UID, never by its name
// (which a label anyone who may create a pipeline can copy): p carries LabelTriggerUID
// with t's UID, as the trigger labels each pipeline it creates, or p's controller is t
// (an ownerReference of kind PipelineTrigger with t's name and UID). The install's
// admission policy lets only who may write a trigger's status (its controller) set
// either; when p has both, they must agree.
func (t *PipelineTrigger) Controls(p *Pipeline) bool {
	if t.UID == "" || p.Namespace != t.Namespace {
		return false
	}
	uid, labelled := p.Labels[LabelTriggerUID]
	if labelled && uid != string(t.UID) {
		return false
	}
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil {
		return labelled
	}
	if ref.Kind != "PipelineTrigger" || ref.Name != t.Name || ref.UID != t.UID {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == SchemeGroupVersion.Group
}
