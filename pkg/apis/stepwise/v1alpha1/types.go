package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Limits shared by the schema markers below and the controller, which enforces the ones
// the schema cannot (sizes of what executors return). Markers must spell them as literals:
// crd/crd_test.go checks the generated schema agrees.
const (
	// MaxSteps bounds a pipeline's length; it also keeps the CEL uniqueness rule cheap.
	MaxSteps = 50
	// MaxStepMessageLength bounds a step's status message, in bytes.
	MaxStepMessageLength = 1024
	// MaxStepBlockers bounds the objects a step's status names as blocking it.
	MaxStepBlockers = 16
	// MaxParamValueLength bounds a value of spec.params or of a step's with, in
	// characters (CEL's size of a string); MaxParamNameLength bounds their names.
	MaxParamValueLength = 65536
	MaxParamNameLength  = 253
	// MaxSpecValuesLength bounds the names and values of spec.params and of every step's
	// with together, in characters: a quarter of what the API server stores in one object,
	// so that what a tenant writes into one pipeline's values stays far below it.
	MaxSpecValuesLength = 262144
	// MaxRecordedParamsSize bounds, in bytes, the parameters a step's run record keeps
	// for its teardown (StepRun.Params); YAML parameters are kept as their digest.
	MaxRecordedParamsSize = 8192
	// MaxResolvedParamsSize bounds, in bytes, a step's parameters once every $(...)
	// reference is substituted: references multiply a value, and the schema can only bound
	// what is written.
	MaxResolvedParamsSize = 256 << 10
	// MaxDurationLength bounds the text of every duration field: metav1.Duration fails
	// to decode what time.ParseDuration refuses (an overflow such as 9999999999h), and one
	// object that fails to decode would stop a whole informer. With at most five digits a
	// number, 32 characters cannot overflow (5 × 99999h is far below int64 nanoseconds),
	// so the CEL rules, which check the digits before they parse, never fail to evaluate:
	// a rule that errors on a stored object would refuse every later status write to it.
	MaxDurationLength = 32
)

// Bounds of the duration fields, checked at admission by CEL rules that parse the value
// as the operator will (crd/bounds_test.go checks the markers spell these), and honoured by
// the engine for objects stored before the rules existed.
const (
	// MaxStepTimeout bounds spec.steps[].timeout.
	MaxStepTimeout = 168 * time.Hour
	// MaxBackoff bounds retry.backoff.initial and retry.backoff.max.
	MaxBackoff = 24 * time.Hour
	// MaxWindowDuration bounds a trigger's maintenanceWindow.duration.
	MaxWindowDuration = 168 * time.Hour
)

// Pipeline runs its steps in order, each through a TaskExecutor, and runs their teardown in
// reverse order when it is deleted.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=swp,categories=stepwise
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:selectablefield:JSONPath=".status.resting"
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.status.currentStep`
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Pipeline struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PipelineSpec `json:"spec"`
	// +optional
	Status PipelineStatus `json:"status,omitempty"`

	// Elided is set on the operator's cached copy of a pipeline whose values the cache
	// left out, and on no other copy: it is never serialized, so no object read from the
	// API server has it, and no tenant can set it.
	Elided *ElidedValues `json:"-"`

	// MetadataOnly is set, as Elided is, on the operator's cached copy of a resting
	// pipeline (status.resting) that changed: the cache holds its metadata and, of its
	// status, only Phase and Resting.
	MetadataOnly bool `json:"-"`
}

// TemplateRef names a PipelineTemplate in the pipeline's namespace.
type TemplateRef struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// FailurePolicy says what a pipeline does when a step fails for good.
// +kubebuilder:validation:Enum=Stop;Teardown
type FailurePolicy string

const (
	// FailureStop leaves the pipeline failed, waiting for a retry or a deletion.
	FailureStop FailurePolicy = "Stop"
	// FailureTeardown tears down the steps that ran, last first, as soon as a step fails
	// for good, so that a failure never leaves a fleet worse off (a cordoned node is
	// uncordoned, a trigger's budget slot is freed).
	FailureTeardown FailurePolicy = "Teardown"
)

// UpdatePolicy says what an edit of a started pipeline's spec does.
// +kubebuilder:validation:Enum=Immutable;Rerun
type UpdatePolicy string

const (
	// UpdateImmutable: the steps, params and serviceAccountName cannot change once the
	// pipeline exists (only suspend may): an edit never re-runs destructive work against
	// whatever now has a name. Run it again with a new Pipeline (kubectl stepwise rerun).
	UpdateImmutable UpdatePolicy = "Immutable"
	// UpdateRerun: an edit runs the steps again, for declarative pipelines. What a removed
	// step, or a step whose executor or parameters changed, created is torn down first,
	// from its run record (executors that update in place, such as k8s.apply, are re-run
	// instead and prune what they no longer declare).
	UpdateRerun UpdatePolicy = "Rerun"
)

// PipelineSpec is what the user asks for.
//
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.updatePolicy) && oldSelf.updatePolicy == 'Rerun') || (has(self.steps) == has(oldSelf.steps) && (!has(self.steps) || self.steps == oldSelf.steps) && has(self.templateRef) == has(oldSelf.templateRef) && (!has(self.templateRef) || self.templateRef == oldSelf.templateRef) && has(self.params) == has(oldSelf.params) && (!has(self.params) || self.params == oldSelf.params) && has(self.serviceAccountName) == has(oldSelf.serviceAccountName) && (!has(self.serviceAccountName) || self.serviceAccountName == oldSelf.serviceAccountName))",message="the steps, templateRef, params and serviceAccountName of a pipeline with updatePolicy Immutable cannot change (only suspend can): run it again as a new Pipeline, e.g. kubectl stepwise rerun NAME"
// +kubebuilder:validation:XValidation:rule="has(self.steps) != has(self.templateRef)",message="a pipeline has either steps or a templateRef"
// +kubebuilder:validation:XValidation:rule="(has(self.dryRun) && self.dryRun) == (has(oldSelf.dryRun) && oldSelf.dryRun)",message="dryRun cannot change: plan again with a new dry-run Pipeline, or create one without dryRun to run"
// +kubebuilder:validation:XValidation:rule="!has(self.steps) || self.steps.all(s, self.steps.exists_one(t, t.name == s.name))",message="step names must be unique"
// +kubebuilder:validation:XValidation:rule="(has(self.params) ? self.params.map(k, size(k) + size(self.params[k])).sum() : 0) + (has(self.steps) ? self.steps.map(s, has(s.with) ? s.with.map(k, size(k) + size(s.with[k])).sum() : 0).sum() : 0) <= 262144",message="the names and values of params and of every step's with are at most 262144 characters together"
type PipelineSpec struct {
	// ServiceAccountName is the ServiceAccount, in the pipeline's namespace, whose
	// permissions the executors act with. Empty means the namespace's "default".
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// Params are values steps refer to as $(params.NAME).
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && size(self[k]) <= 65536)",message="parameter names are at most 253 characters and values at most 65536"
	Params map[string]string `json:"params,omitempty"`

	// Suspend stops the pipeline before its next hook; the hook already running finishes.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// DryRun plans the pipeline instead of running it: for each step, in order, the engine
	// asks its executor what it would do, from the cluster as it is now and acting as the
	// ServiceAccount, touching nothing, and writes the plan into the step's status; the
	// pipeline ends in phase Planned. Deleting it runs no teardown. It cannot change.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// UpdatePolicy says what an edit of the steps, params or serviceAccountName does:
	// Immutable (the default) refuses it; Rerun runs the steps again.
	// +optional
	// +kubebuilder:default=Immutable
	UpdatePolicy UpdatePolicy `json:"updatePolicy,omitempty"`

	// Steps run in order; each must succeed before the next starts. A pipeline has either
	// steps or a templateRef.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	Steps []Step `json:"steps,omitempty"`

	// TemplateRef runs the steps of a PipelineTemplate of the pipeline's namespace, with
	// params as its parameters. The pipeline keeps the template as it found it when it
	// started: editing or deleting the template later changes nothing of this run.
	// +optional
	TemplateRef *TemplateRef `json:"templateRef,omitempty"`

	// OnFailure says what happens when a step fails for good: Stop leaves everything as
	// it is until a retry or deletion; Teardown tears down the steps that ran, last first,
	// at once (a node is uncordoned), and the pipeline ends Failed. Empty: the template's,
	// else Stop.
	// +optional
	OnFailure FailurePolicy `json:"onFailure,omitempty"`

	// Retention removes the pipeline from the API server once the archive has its finished
	// state and it has been finished this long, WITHOUT tearing down what its steps made
	// (as the Orphan teardown policy does): its record in the archive says Removed. It acts
	// only while archiving is on. Empty: its template's, else the operator's
	// --default-retention, which applies only to pipelines whose steps recorded nothing
	// they created. Editing it runs nothing again.
	// +optional
	Retention *Retention `json:"retention,omitempty"`
}

// Step is one unit of work, run by the executor it names.
type Step struct {
	// Name identifies the step within the pipeline (a DNS-1123 label).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Executor names the TaskExecutor, built in or served by a plugin, e.g. "node.cordon".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Executor string `json:"executor"`

	// With are the executor's parameters. Values may refer to $(params.NAME) and to
	// $(steps.STEP.outputs.KEY) of an earlier step.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && size(self[k]) <= 65536)",message="parameter names are at most 253 characters and values at most 65536"
	With map[string]string `json:"with,omitempty"`

	// Timeout bounds one attempt of a hook, including the time it spends reporting
	// "not done yet". Defaults to 1h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|µs|ms|s|m|h))+$') && duration(self) > duration('0s') && duration(self) <= duration('168h')",message="timeout must be more than 0s and at most 168h"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// Retry says how often and how fast a failing hook is tried again. Defaults to 3
	// retries with a backoff of 1s doubling up to 1m.
	// +optional
	Retry *RetryPolicy `json:"retry,omitempty"`

	// Approval, set, holds the step until enough people approve it (kubectl stepwise
	// approve): its hooks run only then. A rejection fails the step with the rejecter's
	// comment, and so does the deadline; the pipeline's onFailure applies.
	// +optional
	Approval *ApprovalPolicy `json:"approval,omitempty"`
}

// RetryPolicy bounds the retries of a step's failing hooks.
type RetryPolicy struct {
	// Limit is how many times a failing hook is retried; 0 means never.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Limit int32 `json:"limit"`

	// Backoff is the wait between retries.
	// +optional
	Backoff *Backoff `json:"backoff,omitempty"`
}

// Backoff is an exponential backoff; each wait gets up to 10% of jitter on top.
type Backoff struct {
	// Initial is the first wait. Defaults to 1s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|µs|ms|s|m|h))+$') && duration(self) <= duration('24h')",message="backoff durations are at most 24h"
	Initial *metav1.Duration `json:"initial,omitempty"`

	// Factor multiplies the wait after each retry. Defaults to 2.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	Factor int32 `json:"factor,omitempty"`

	// Max caps the wait. Defaults to 1m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|µs|ms|s|m|h))+$') && duration(self) <= duration('24h')",message="backoff durations are at most 24h"
	Max *metav1.Duration `json:"max,omitempty"`
}

// PipelinePhase summarises where a pipeline is.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;Suspended;Deleting;Planned
type PipelinePhase string

// The phases of a pipeline.
const (
	PipelinePending   PipelinePhase = "Pending"
	PipelineRunning   PipelinePhase = "Running"
	PipelineSucceeded PipelinePhase = "Succeeded"
	PipelineFailed    PipelinePhase = "Failed"
	PipelineSuspended PipelinePhase = "Suspended"
	PipelineDeleting  PipelinePhase = "Deleting"
	// PipelinePlanned: a dry run's every step was planned; nothing ran.
	PipelinePlanned PipelinePhase = "Planned"
)

// StepPhase summarises where a step is.
// +kubebuilder:validation:Enum=Pending;AwaitingApproval;Running;Waiting;Succeeded;Failed;Deleting;Deleted;Planned
type StepPhase string

// The phases of a step.
const (
	// StepPending: not started.
	StepPending StepPhase = "Pending"
	// StepAwaitingApproval: the step waits for people to approve it before its hooks run.
	StepAwaitingApproval StepPhase = "AwaitingApproval"
	// StepRunning: a hook is running or reported that it is not done yet.
	StepRunning StepPhase = "Running"
	// StepWaiting: a hook failed and the step waits out its backoff before retrying.
	StepWaiting StepPhase = "Waiting"
	// StepSucceeded: every create hook is done.
	StepSucceeded StepPhase = "Succeeded"
	// StepFailed: a hook failed permanently or ran out of retries.
	StepFailed StepPhase = "Failed"
	// StepDeleting: the teardown hooks are running.
	StepDeleting StepPhase = "Deleting"
	// StepDeleted: every teardown hook is done.
	StepDeleted StepPhase = "Deleted"
	// StepPlanned: in a dry run, the step's plan is in its status.
	StepPlanned StepPhase = "Planned"
)

// Hook names one of the six hooks of a TaskExecutor.
// +kubebuilder:validation:Enum=PreCreate;Create;PostCreate;PreDelete;Delete;PostDelete
type Hook string

// The hooks, in the order they run.
const (
	HookPreCreate  Hook = "PreCreate"
	HookCreate     Hook = "Create"
	HookPostCreate Hook = "PostCreate"
	HookPreDelete  Hook = "PreDelete"
	HookDelete     Hook = "Delete"
	HookPostDelete Hook = "PostDelete"
)

// ConditionReady is the condition type of both the pipeline and its steps.
const ConditionReady = "Ready"

// Conditions beside Ready that GitOps tools read (kstatus: Flux, kpt): Reconciling True
// while a pipeline runs or waits to, Stalled True while it has failed and waits for a
// person; neither once it succeeded. Their reason and message are Ready's.
const (
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
)

// PipelineStatus is what the operator observed and did.
type PipelineStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// SpecHash identifies the spec the steps last started running for: everything but
	// suspend. When it changes, every step runs again.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	SpecHash string `json:"specHash,omitempty"`

	// RefusedSpecHash identifies a spec the engine refuses to run (it changed after steps
	// ran, under updatePolicy Immutable), so that it says so once per edit; empty when the
	// spec runs.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	RefusedSpecHash string `json:"refusedSpecHash,omitempty"`

	// Phase summarises where the pipeline is.
	// +optional
	Phase PipelinePhase `json:"phase,omitempty"`

	// Resting is the phase, Succeeded or Failed, of a pipeline that finished and has
	// nothing left to do: never edited (generation 1), not a trigger's, archived when
	// archiving is on, no retention to wait for, no retry asked. The operator then only
	// watches its metadata, and reads it whole again when it is deleted, edited or
	// retried. Empty otherwise. A selectable field: --field-selector status.resting=Failed.
	// +optional
	Resting PipelinePhase `json:"resting,omitempty"`

	// CurrentStep is the step being run or torn down, or the step that failed.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	CurrentStep string `json:"currentStep,omitempty"`

	// Progress is "succeeded steps/all steps", e.g. "2/4".
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Progress string `json:"progress,omitempty"`

	// StartTime is when the first step of the current generation started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the last step of the current generation succeeded.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Conditions of the pipeline; "Ready" is True once every step succeeded.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// BlockedBy is what holds the pipeline back now (a PodDisruptionBudget refusing its
	// drain, an approval, a failed step, a blocked teardown), since when and what would let
	// it go on; empty while it runs freely and once it is done. kubectl stepwise why reads it.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	BlockedBy []Blocker `json:"blockedBy,omitempty"`

	// Steps holds one entry for each step of the spec, in spec order.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Steps []StepStatus `json:"steps,omitempty"`

	// Template is the PipelineTemplate as the pipeline found it when it started: its steps
	// and the parameters, defaults applied, that the steps run with from then on.
	// +optional
	Template *TemplateSnapshot `json:"template,omitempty"`

	// RetiredSteps are runs of steps the spec no longer has as they ran (removed, renamed,
	// or edited under updatePolicy Rerun) whose teardown has not finished: they are torn
	// down from their run record, last first, before the steps run again, and when the
	// pipeline is deleted.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	RetiredSteps []StepStatus `json:"retiredSteps,omitempty"`

	// Failure is the step failure the pipeline handles under onFailure: Teardown, from the
	// moment the teardown of the steps that ran begins until a retry starts the pipeline
	// over. The engine reads what it is doing from here; the Ready condition only tells it.
	// +optional
	Failure *FailureRecord `json:"failure,omitempty"`

	// Archived is the last state of the pipeline the operator wrote to its archive (when
	// archiving is on), so that each state is written once; the history.stepwise.dev API
	// serves what was written.
	// +optional
	Archived *ArchivedState `json:"archived,omitempty"`
}

// Retention is how long a finished, archived pipeline stays in the API server.
type Retention struct {
	// AfterFinished is how long after its finished state was archived the pipeline is
	// removed, as a Go duration (e.g. 720h).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h))+$`
	AfterFinished metav1.Duration `json:"afterFinished"`
}

// ArchivedState is a state of a pipeline written to the archive.
type ArchivedState struct {
	// Generation is the spec generation the state was of.
	// +kubebuilder:validation:Minimum=0
	Generation int64 `json:"generation"`
	// State is what happened to the pipeline.
	State ArchiveState `json:"state"`
	// Time is when it was written.
	Time metav1.Time `json:"time"`
}

// ArchiveState is what happened to a pipeline that its record in the archive keeps: a
// finished pipeline is archived as Succeeded or Failed, and again as Deleted or Orphaned
// when it goes, or Removed when retention removes it.
// +kubebuilder:validation:Enum=Succeeded;Failed;Deleted;Orphaned;Removed
type ArchiveState string

const (
	// ArchiveSucceeded: every step succeeded.
	ArchiveSucceeded ArchiveState = "Succeeded"
	// ArchiveFailed: a step failed for good (and what ran was torn down, under onFailure
	// Teardown).
	ArchiveFailed ArchiveState = "Failed"
	// ArchiveDeleted: the pipeline was deleted, after the teardown of what its steps made.
	ArchiveDeleted ArchiveState = "Deleted"
	// ArchiveOrphaned: the pipeline was deleted without a teardown, as its annotation asked;
	// what its steps made is left in place.
	ArchiveOrphaned ArchiveState = "Orphaned"
	// ArchiveRemoved: retention removed the archived pipeline from the API server without a
	// teardown; what its steps made is left in place.
	ArchiveRemoved ArchiveState = "Removed"
)

// FailureRecord is a step that failed for good under onFailure: Teardown, and where the
// teardown of the steps that ran is.
type FailureRecord struct {
	// Step is the step that failed.
	// +kubebuilder:validation:MaxLength=63
	Step string `json:"step"`

	// Message is what the step's status said of its failure.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// Since is when the teardown after the failure began.
	Since metav1.Time `json:"since"`

	// Teardown is where the teardown of the steps that ran is.
	Teardown FailureTeardownPhase `json:"teardown"`
}

// FailureTeardownPhase is where the teardown after a failure is.
// +kubebuilder:validation:Enum=TearingDown;TornDown
type FailureTeardownPhase string

const (
	// FailureTearingDown: the steps that ran are being torn down, last first.
	FailureTearingDown FailureTeardownPhase = "TearingDown"
	// FailureTornDown: every step that ran was torn down; the pipeline is finished.
	FailureTornDown FailureTeardownPhase = "TornDown"
)

// StepStatus is the observed state of one step.
type StepStatus struct {
	// Name of the step.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// Executor that ran it.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Executor string `json:"executor,omitempty"`

	// Phase summarises where the step is.
	// +optional
	Phase StepPhase `json:"phase,omitempty"`

	// Hook is the hook that ran last, or runs now.
	// +optional
	Hook Hook `json:"hook,omitempty"`

	// ObservedGeneration is the pipeline generation this step last started for.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Attempts counts the attempts of the current hook; 1 on the first try.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Attempts int32 `json:"attempts,omitempty"`

	// StartTime is when the step's first hook started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when its last create hook, or after deletion its last teardown
	// hook, finished.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// HookStartTime is when the current attempt of the current hook started; the step's
	// timeout counts from it.
	// +optional
	HookStartTime *metav1.Time `json:"hookStartTime,omitempty"`

	// NextAttemptTime is when a failed hook is tried again.
	// +optional
	NextAttemptTime *metav1.Time `json:"nextAttemptTime,omitempty"`

	// PollInterval is how long the waiting hook asked to wait before it is called again.
	// An operator restarted meanwhile waits as long before its first call: never sooner
	// than the hook asked.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`

	// Outputs the executor reported, for later steps to refer to.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 4096 && size(self[k]) <= 4096)",message="outputs are at most 4096 characters"
	Outputs map[string]string `json:"outputs,omitempty"`

	// HookState is what the current hook keeps for its next call while it waits (an
	// operation ID, a phase): private to the executor, not an output; dropped once the
	// hook is done.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 4096 && size(self[k]) <= 4096)",message="hook state is at most 4096 characters"
	HookState map[string]string `json:"hookState,omitempty"`

	// Created is what the step's hooks recorded they created (a remote ID), for its
	// teardown: private to the step, not an output; kept until its teardown finished.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 4096 && size(self[k]) <= 4096)",message="the created record is at most 4096 characters"
	Created map[string]string `json:"created,omitempty"`

	// Plan is what the step would do, in a dry run (spec.dryRun).
	// +optional
	Plan *StepPlan `json:"plan,omitempty"`

	// Approval is where the approval of a step that needs one is: since when it waits, and
	// who approved or rejected it, when, and with what comment.
	// +optional
	Approval *StepApproval `json:"approval,omitempty"`

	// Message is the executor's or the engine's last word on the step.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// Reason is why the step's last attempt failed (while it waits to try again, and once
	// it failed) or why its teardown was skipped: one CamelCase word (Timeout,
	// TicketRejected) that the Message explains. The step's Ready condition carries it.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`

	// BlockedBy names the objects the step's waiting hook waits on, as its executor says,
	// such as the PodDisruptionBudgets that refuse a drain's evictions. Empty once the
	// hook moves on.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	BlockedBy []BlockingObject `json:"blockedBy,omitempty"`

	// Ran records what the step's Create hook was called with. Its teardown runs from this
	// record, not from the spec, and only a step with a record is torn down.
	// +optional
	Ran *StepRun `json:"ran,omitempty"`

	// Conditions of the step; "Ready" is True once its create hooks are done.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// KindPodDisruptionBudget is the kind of the blocker node.drain names for each
// PodDisruptionBudget that refuses its evictions; a trigger counts the pipelines blocked
// on them.
const KindPodDisruptionBudget = "PodDisruptionBudget"

// KindDeployment is the kind of the blocker node.drain names while it waits for the
// replacement of a pod it brings up first (replacement Surge): the Deployment it scaled up.
const KindDeployment = "Deployment"

// KindEvictionRequest is the kind of the blocker node.drain names while a pod's eviction
// responders hand it off: the EvictionRequest it created for the pod.
const KindEvictionRequest = "EvictionRequest"

// BlockingObject is an object a step waits on.
type BlockingObject struct {
	// Kind of the object, such as PodDisruptionBudget.
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Namespace of the object; empty for one that has none.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// TemplateSnapshot is what a pipeline took from its template.
type TemplateSnapshot struct {
	// Name of the template.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// UID and Generation of the template it was taken from.
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid"`
	// +kubebuilder:validation:Minimum=0
	Generation int64 `json:"generation"`
	// Params are the pipeline's params with the template's defaults filled in.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && size(self[k]) <= 65536)",message="parameter names are at most 253 characters and values at most 65536"
	Params map[string]string `json:"params,omitempty"`
	// OnFailure is the template's.
	// +optional
	OnFailure FailurePolicy `json:"onFailure,omitempty"`
	// Retention is the template's.
	// +optional
	Retention *Retention `json:"retention,omitempty"`
	// Steps are the template's steps.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Steps []Step `json:"steps"`
	// Authors are who made the template and, for a trigger's pipeline, the trigger, as the
	// API server recorded them when the run took the template: four eyes refuses their
	// approvals, whatever becomes of those objects since.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	Authors []Authorship `json:"authors,omitempty"`
}

// Authorship is who created an object a run depends on and who changed its spec since, as
// the install's admission policies recorded them (AnnotationCreatedBy, AnnotationEditedBy).
type Authorship struct {
	// Kind of the object: PipelineTemplate or PipelineTrigger.
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Name and UID of the object.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid,omitempty"`
	// CreatedBy is the user who created it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	CreatedBy string `json:"createdBy,omitempty"`
	// EditedBy are the users who changed its spec, each once.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=1024
	EditedBy []string `json:"editedBy,omitempty"`
	// Unrecorded says what the object does not record; four eyes then counts no approval.
	// +optional
	Unrecorded AuthorshipGap `json:"unrecorded,omitempty"`
}

// AuthorshipGap is what an object does not record of who made it.
// +kubebuilder:validation:Enum=CreatorUnknown;EditorsUnknown;Gone
type AuthorshipGap string

const (
	// AuthorsCreatorUnknown: no AnnotationCreatedBy (made before the install stamped it,
	// or where no MutatingAdmissionPolicy runs).
	AuthorsCreatorUnknown AuthorshipGap = "CreatorUnknown"
	// AuthorsEditorsUnknown: its spec changed and AnnotationEditedBy does not name everyone
	// who changed it (changed before the install recorded changes, or by more users than
	// the annotation keeps).
	AuthorsEditorsUnknown AuthorshipGap = "EditorsUnknown"
	// AuthorsGone: the object was gone when the operator looked for who made it.
	AuthorsGone AuthorshipGap = "Gone"
)

// StepRun is what a step ran with: enough to tear it down whatever happened to the spec.
type StepRun struct {
	// Executor that ran the step.
	// +kubebuilder:validation:MaxLength=253
	Executor string `json:"executor"`

	// Params the hooks were given, every reference resolved; Secrets appear by name only
	// (the parameters name them). A YAML parameter is kept as "sha256:" and its digest: the
	// teardown works from what Create recorded in its outputs (k8s.apply's inventory).
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && size(self[k]) <= 8192)",message="recorded parameters are at most 8192 characters"
	Params map[string]string `json:"params,omitempty"`

	// StepHash identifies the step's spec (executor, with, timeout, retry) it ran for.
	// +kubebuilder:validation:MaxLength=64
	StepHash string `json:"stepHash"`

	// Generation of the pipeline it ran for.
	// +kubebuilder:validation:Minimum=0
	Generation int64 `json:"generation"`
}

// PipelineList is a list of Pipelines.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type PipelineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Pipeline `json:"items"`
}

// StepPlan is what a step would do, found out without doing it.
type StepPlan struct {
	// Summary says it in a line.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Summary string `json:"summary,omitempty"`
	// Details are the things it would touch, one row each.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=101
	Details []PlanItem `json:"details,omitempty"`
	// Warnings are what would block or fail it.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=512
	Warnings []string `json:"warnings,omitempty"`
}

// PlanItem is one thing a step would touch.
type PlanItem struct {
	// Kind of the thing: Node, Pod, Deployment, VirtualMachine...
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Name of the thing; namespace/name for a namespaced object.
	// +kubebuilder:validation:MaxLength=512
	Name string `json:"name"`
	// Action is what would be done to it: create, change, unchanged, evict, skip, delete...
	// +kubebuilder:validation:MaxLength=63
	Action string `json:"action"`
	// Note says more: the fields that change, the budget that blocks it.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Note string `json:"note,omitempty"`
}
