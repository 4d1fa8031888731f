package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// +genclient
// +genclient:onlyVerbs=get,list
// +genclient:noStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// PipelineRecord is what the archive keeps of one state of a pipeline (finished, deleted,
// removed by retention): its spec and status as they were then, and the Events the operator
// recorded for it. Each state of each generation has one record, written once. Records
// are read-only; the pipeline's namespace's RBAC on pipelinerecords decides who reads them.
//
// Its name is RecordName(pipeline, uid, generation, state); its labels are the pipeline's;
// its creationTimestamp is when it was archived.
type PipelineRecord struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Pipeline is the pipeline the record is of.
	Pipeline PipelineReference `json:"pipeline"`
	// State is what happened to the pipeline that the record keeps.
	State RecordState `json:"state"`
	// Phase is the pipeline's phase in that state.
	// +optional
	Phase stepwisev1alpha1.PipelinePhase `json:"phase,omitempty"`
	// Trigger is the PipelineTrigger that made the pipeline, if one did.
	// +optional
	Trigger string `json:"trigger,omitempty"`
	// Object is the object the trigger's pipeline was for (namespace/name, or name).
	// +optional
	Object string `json:"object,omitempty"`
	// Creator is the user who created the pipeline, as the API server recorded it.
	// +optional
	Creator string `json:"creator,omitempty"`
	// Finished is when the pipeline reached the state.
	Finished metav1.Time `json:"finished"`

	// Spec is the pipeline's spec in that state.
	// +optional
	Spec stepwisev1alpha1.PipelineSpec `json:"spec,omitempty"`
	// Status is the pipeline's status in that state: every step's run and run record,
	// approvals with their approvers, the failure and its teardown.
	// +optional
	Status stepwisev1alpha1.PipelineStatus `json:"status,omitempty"`
	// Events the operator recorded for the pipeline, oldest first.
	// +optional
	Events []RecordedEvent `json:"events,omitempty"`
}

// PipelineReference names a pipeline across its lives: the same name may be used again,
// the UID never.
type PipelineReference struct {
	Name       string `json:"name"`
	UID        string `json:"uid"`
	Generation int64  `json:"generation"`
	// Created is the pipeline's creationTimestamp.
	Created metav1.Time `json:"created"`
}

// RecordState is what happened to a pipeline that a record keeps (one definition, in the
// Pipeline's API, whose status says which state was archived last).
type RecordState = stepwisev1alpha1.ArchiveState

// The states a record keeps.
const (
	RecordSucceeded = stepwisev1alpha1.ArchiveSucceeded
	RecordFailed    = stepwisev1alpha1.ArchiveFailed
	RecordDeleted   = stepwisev1alpha1.ArchiveDeleted
	RecordOrphaned  = stepwisev1alpha1.ArchiveOrphaned
	RecordRemoved   = stepwisev1alpha1.ArchiveRemoved
)

// RecordedEvent is an Event the operator recorded for a pipeline.
type RecordedEvent struct {
	Type    string      `json:"type"`
	Reason  string      `json:"reason"`
	Message string      `json:"message"`
	Time    metav1.Time `json:"time"`
	// Count is how many times the Event was recorded at once (the recorder's aggregation).
	// +optional
	Count int32 `json:"count,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// PipelineRecordList is a page of records.
type PipelineRecordList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PipelineRecord `json:"items"`
}
