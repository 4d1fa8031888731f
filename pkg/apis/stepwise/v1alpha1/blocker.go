package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Blocker is one thing that holds a pipeline or a trigger back, as data that kubectl
// stepwise why, the dashboard, the trigger and the metrics read instead of a message: what
// kind of thing, which object, since when, and what would let it go on. The engine or the
// executor that knows it writes it.
type Blocker struct {
	// Kind of thing: one of the Blocker* kinds, or an object's kind an executor names
	// (PodDisruptionBudget).
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Namespace of the object; empty for one that has none.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Name of the object (a PodDisruptionBudget, a gate, a NodeBudget), if there is one.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// Step it holds back, in a pipeline.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Step string `json:"step,omitempty"`
	// Since when it has held back.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// Unblock says what would let it go on.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Unblock string `json:"unblock,omitempty"`
}

// MaxBlockers is how many blockers a status lists.
const MaxBlockers = 16

// Kinds of Blocker the engine and the trigger write; an executor names the kind of the
// object it waits on (KindPodDisruptionBudget).
const (
	// BlockerApproval: a step waits for people to approve it.
	BlockerApproval = "Approval"
	// BlockerSuspended: spec.suspend holds it.
	BlockerSuspended = "Suspended"
	// BlockerTemplate: its PipelineTemplate does not exist.
	BlockerTemplate = "PipelineTemplate"
	// BlockerTeardown: a teardown is blocked and keeps the pipeline from going on.
	BlockerTeardown = "Teardown"
	// BlockerArchive: a deleted pipeline waits for the archive to take its record.
	BlockerArchive = "Archive"
	// BlockerRetry: a step failed and waits out its backoff before it is tried again.
	BlockerRetry = "Retry"
	// BlockerStepFailed: a step failed for good; a person retries it or edits the spec.
	BlockerStepFailed = "StepFailed"
	// BlockerPaused: a person paused the trigger.
	BlockerPaused = "Paused"
	// BlockerFailureBudget: the trigger's failure budget is spent.
	BlockerFailureBudget = "FailureBudget"
	// BlockerGate: a health gate does not hold (or did not, past its deadline).
	BlockerGate = "Gate"
	// BlockerNodeBudget: the shared NodeBudget is full, or does not exist.
	BlockerNodeBudget = "NodeBudget"
	// BlockerWindow: outside the trigger's maintenance windows.
	BlockerWindow = "MaintenanceWindow"
	// BlockerCoolDown: the trigger waits between starts.
	BlockerCoolDown = "CoolDown"
	// BlockerConcurrency: the trigger runs as many pipelines as its concurrency allows.
	BlockerConcurrency = "Concurrency"
)

// KeepBlockerSince gives each blocker without a time the time of the same blocker (kind,
// object and step) in before, the status it replaces, or now: "since" is when it began to
// hold, not the last sync, and an unchanged status is not written again.
func KeepBlockerSince(blockers, before []Blocker, now *metav1.Time) {
	for i := range blockers {
		b := &blockers[i]
		if b.Since != nil {
			continue
		}
		b.Since = now
		for _, old := range before {
			if old.Kind == b.Kind && old.Namespace == b.Namespace && old.Name == b.Name && old.Step == b.Step && old.Since != nil {
				b.Since = old.Since
				break
			}
		}
	}
}

// KnownBlockerKind tells whether kind is one the engine or the trigger writes, or one
// node.drain names (KindPodDisruptionBudget, KindDeployment, KindEvictionRequest); an
// executor may name any other.
func KnownBlockerKind(kind string) bool {
	switch kind {
	case KindPodDisruptionBudget, KindDeployment, KindEvictionRequest, BlockerApproval, BlockerSuspended, BlockerTemplate, BlockerTeardown, BlockerRetry,
		BlockerStepFailed, BlockerPaused, BlockerFailureBudget, BlockerGate, BlockerNodeBudget, BlockerWindow,
		BlockerCoolDown, BlockerConcurrency, BlockerPlugin:
		return true
	}
	return false
}
