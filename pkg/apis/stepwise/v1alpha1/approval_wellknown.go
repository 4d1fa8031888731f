package v1alpha1

// Names of approvals the operator, kubectl-stepwise, the dashboard and the install's
// admission policies share.
const (
	// VerbApprove is the verb a user needs on a pipeline (resource pipelines, its name) to
	// approve or reject its steps: a custom verb, as Kubernetes checks escalate and bind.
	VerbApprove = "approve"
	// AnnotationCreatedBy is the user who created a Pipeline or PipelineTrigger, as the API
	// server authenticated them: the install's MutatingAdmissionPolicy stamps it at
	// creation, and its ValidatingAdmissionPolicy refuses any other value or a change.
	// Four eyes compares approvers with it.
	AnnotationCreatedBy = "stepwise.dev/created-by"
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
	// approve the step, created the pipeline under four eyes, or already decided).
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
