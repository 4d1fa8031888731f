package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bounds of approvals the schema markers spell as literals and the engine honours.
const (
	// MaxApprovalRecords bounds the decisions a step's status keeps, and reads: the first
	// ones the engine saw (a user's repeated decision takes no room). Only a recorded
	// decision counts.
	MaxApprovalRecords = 16
	// MaxApprovalCommentLength bounds an approval's comment, in bytes.
	MaxApprovalCommentLength = 1024
	// MaxApprovalsRequired bounds how many people a step may ask to approve it.
	MaxApprovalsRequired = 10
)

// Approval is one person's decision on a step that waits for approval (a step with
// approval set). It is made by creating it, as the user the API server authenticated: the
// install's admission policy refuses an Approval whose user or groups are not the
// requester's, or whose requester lacks the verb "approve" on the pipeline. It never
// changes: a change of mind is another Approval (a rejection after one's approval fails
// the step if it still waits; a second approval by the same person counts once).
//
// +genclient
// +genclient:noStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=swa,categories=stepwise
// +kubebuilder:printcolumn:name="Pipeline",type=string,JSONPath=`.spec.pipeline`
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.spec.step`
// +kubebuilder:printcolumn:name="Decision",type=string,JSONPath=`.spec.decision`
// +kubebuilder:printcolumn:name="User",type=string,JSONPath=`.spec.user`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Approval struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ApprovalSpec `json:"spec"`
}

// ApprovalDecision is what an Approval says.
// +kubebuilder:validation:Enum=Approve;Reject
type ApprovalDecision string

// The decisions.
const (
	ApprovalApprove ApprovalDecision = "Approve"
	ApprovalReject  ApprovalDecision = "Reject"
)

// ApprovalSpec is a decision on one wait of one step.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="an Approval cannot change: create another"
type ApprovalSpec struct {
	// Pipeline is the name of the pipeline, in the Approval's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Pipeline string `json:"pipeline"`

	// Step is the name of the step that waits.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Step string `json:"step"`

	// Request is the wait the decision is on: the step's status.steps[].approval.request.
	// Each wait has its own, so that a decision on an earlier run of the step, or on a
	// pipeline of the same name deleted since, never counts.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9]+$`
	Request string `json:"request"`

	// Decision approves the step or rejects it; a rejection fails it.
	Decision ApprovalDecision `json:"decision"`

	// Comment says why; a rejection's is the step's failure message.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Comment string `json:"comment,omitempty"`

	// User is who decides: the username the API server authenticated the creator of the
	// Approval as (the admission policy checks it).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	User string `json:"user"`

	// Groups are the creator's groups as the API server authenticated them (the admission
	// policy checks they are exactly those), for a step that names groups of approvers.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	Groups []string `json:"groups,omitempty"`
}

// ApprovalList is a list of Approvals.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type ApprovalList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Approval `json:"items"`
}

// ApprovalPolicy is who must approve a step before its hooks run, and for how long it
// waits.
type ApprovalPolicy struct {
	// Approvals is how many different people must approve. Defaults to 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	Approvals int32 `json:"approvals,omitempty"`

	// Users who may approve. With neither users nor groups, anyone with the verb "approve"
	// on the pipeline may; with either, only those listed, and they need the verb too.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=512
	Users []string `json:"users,omitempty"`

	// Groups whose members may approve.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=512
	Groups []string `json:"groups,omitempty"`

	// FourEyes, set, refuses an approval by whoever created or changed the pipeline, the
	// template it took or the trigger that created it, as the API server recorded them
	// (the stepwise.dev/created-by and stepwise.dev/edited-by annotations the install's
	// admission policy stamps).
	// +optional
	FourEyes bool `json:"fourEyes,omitempty"`

	// Deadline bounds the wait: a step not approved by then fails, and the pipeline's
	// onFailure applies. At most 168h; empty waits until a decision or the pipeline's
	// deletion.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|µs|ms|s|m|h))+$') && duration(self) > duration('0s') && duration(self) <= duration('168h')",message="deadline must be more than 0s and at most 168h"
	Deadline *metav1.Duration `json:"deadline,omitempty"`
}

// EffectiveApprovals is how many different people must approve.
func (a *ApprovalPolicy) EffectiveApprovals() int {
	if a.Approvals < 1 {
		return 1
	}
	return int(min(a.Approvals, MaxApprovalsRequired))
}

// StepApproval is where a step's approval is: the wait, and the decisions it counted.
type StepApproval struct {
	// Request identifies this wait; an Approval names it in spec.request.
	// +kubebuilder:validation:MaxLength=64
	Request string `json:"request"`

	// Since is when the step began to wait.
	Since metav1.Time `json:"since"`

	// Deadline is when the step fails if it is not approved by then.
	// +optional
	Deadline *metav1.Time `json:"deadline,omitempty"`

	// Required is how many different people must approve.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	Required int32 `json:"required"`

	// ApprovedTime is when enough people had approved: the step's hooks run from then on.
	// +optional
	ApprovedTime *metav1.Time `json:"approvedTime,omitempty"`

	// Decisions are the Approvals seen for this wait, in the order the engine saw them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Decisions []ApprovalRecord `json:"decisions,omitempty"`
}

// ApprovalRecord is one Approval as the engine counted it.
type ApprovalRecord struct {
	// Approval is the name of the Approval object.
	// +kubebuilder:validation:MaxLength=253
	Approval string `json:"approval"`

	// User is who decided, as the API server authenticated them.
	// +kubebuilder:validation:MaxLength=512
	User string `json:"user"`

	// Decision is what they decided.
	Decision ApprovalDecision `json:"decision"`

	// Comment is what they said.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Comment string `json:"comment,omitempty"`

	// Time is when they decided (the Approval's creation).
	Time metav1.Time `json:"time"`

	// Counted tells whether the decision counted; Ignored says why not.
	Counted bool `json:"counted"`

	// Ignored says why a decision did not count: the user may not approve this step, or
	// created the pipeline under four eyes, or already decided.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Ignored string `json:"ignored,omitempty"`
}
