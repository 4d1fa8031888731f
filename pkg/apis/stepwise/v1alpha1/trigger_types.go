package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PipelineTrigger runs a PipelineTemplate for every object of a kind that matches its
// selector, at most Concurrency at a time, as its ServiceAccount: "retire every node
// labelled X, two at a time"; "for every WebApp, keep its Deployment and Service".
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=swtrg,categories=stepwise
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.resource.kind`
// +kubebuilder:printcolumn:name="Template",type=string,JSONPath=`.spec.templateRef.name`
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matched`
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.running`
// +kubebuilder:printcolumn:name="Waiting",type=integer,JSONPath=`.status.waiting`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PipelineTrigger struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PipelineTriggerSpec `json:"spec"`
	// +optional
	Status PipelineTriggerStatus `json:"status,omitempty"`
}

// PipelineTriggerSpec says which objects start which template, and how many at once.
// +kubebuilder:validation:XValidation:rule="!has(self.taintWaiting) || !self.taintWaiting || (self.resource.apiVersion == 'v1' && self.resource.kind == 'Node')",message="taintWaiting is for triggers on Nodes (apiVersion v1, kind Node)"
// +kubebuilder:validation:XValidation:rule="!has(self.nodeBudgetRef) || (self.resource.apiVersion == 'v1' && self.resource.kind == 'Node')",message="nodeBudgetRef is for triggers on Nodes (apiVersion v1, kind Node)"
type PipelineTriggerSpec struct {
	// Resource is the kind of object watched: built-in kinds and custom resources,
	// cluster-scoped or namespaced (namespaced ones in the trigger's namespace only). The
	// operator watches only the kinds its installer allowed (--trigger-resources).
	Resource TriggerResource `json:"resource"`

	// Selector chooses the objects by label; empty matches every object of the kind.
	// +optional
	Selector *LabelSelector `json:"selector,omitempty"`

	// MatchFields narrows the objects the selector chooses by their fields; every
	// requirement must hold. Fields are named as in params' $(object.PATH) references,
	// e.g. {field: "spec.unschedulable", operator: DoesNotExist}.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	MatchFields []FieldRequirement `json:"matchFields,omitempty"`

	// TemplateRef names the PipelineTemplate, in the trigger's namespace, each pipeline
	// runs.
	TemplateRef TemplateRef `json:"templateRef"`

	// Retention is the retention of the trigger's pipelines (PipelineSpec.Retention): each
	// is removed once archived and finished this long, without a teardown, and the
	// archive keeps its record. Empty: the template's.
	// +optional
	Retention *Retention `json:"retention,omitempty"`

	// Params are the pipelines' params. Values may refer to the object:
	// $(object.metadata.name), $(object.spec.providerID),
	// $(object.metadata.labels['stepwise.dev/pool']). A field the object lacks is an
	// error for that object, which waits until it has it.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && size(self[k]) <= 65536)",message="parameter names are at most 253 characters and values at most 65536"
	Params map[string]string `json:"params,omitempty"`

	// ServiceAccountName is the ServiceAccount, in the trigger's namespace, that its
	// pipelines act as, and whose right to list and watch the resource the trigger needs.
	// Empty means "default".
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// Concurrency is how many of the trigger's pipelines may be unfinished at once; the
	// other matching objects wait, in the order they matched.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Concurrency int32 `json:"concurrency,omitempty"`

	// WhenUnmatched says what becomes of an object's pipeline when the object is deleted
	// or stops matching: Keep it as a record, or Delete it, which runs its teardown (what
	// it created goes with the object).
	// +optional
	// +kubebuilder:default=Keep
	WhenUnmatched UnmatchedPolicy `json:"whenUnmatched,omitempty"`

	// UpdatePolicy is the updatePolicy of the pipelines; Rerun makes an object's change
	// that changes its params run its pipeline again (the WebApp case).
	// +optional
	// +kubebuilder:default=Immutable
	UpdatePolicy UpdatePolicy `json:"updatePolicy,omitempty"`

	// Suspend stops the trigger from starting pipelines; those running go on.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// MaintenanceWindow, when set, is when the trigger may start pipelines: outside it
	// nothing starts (those running go on), and the status says when it opens next.
	// +optional
	MaintenanceWindow *MaintenanceWindow `json:"maintenanceWindow,omitempty"`

	// TaintWaiting, on a trigger of Nodes, taints each node that waits in the trigger's
	// queue with stepwise.dev/waiting:PreferNoSchedule, so that new pods avoid the nodes
	// about to be retired; the taint goes when the node stops waiting (its pipeline
	// starts, or it no longer matches) and when the trigger goes. The trigger's
	// ServiceAccount needs the right to patch Nodes.
	// +optional
	TaintWaiting bool `json:"taintWaiting,omitempty"`

	// HistoryLimit bounds the finished pipelines of objects that are gone kept under
	// WhenUnmatched Keep; the oldest go first: deleted (their teardown runs, as for any
	// deletion), or, while the operator archives pipelines, removed by retention once
	// archived, without a teardown (the archive keeps their history).
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	HistoryLimit int32 `json:"historyLimit,omitempty"`

	// FailureBudget is how many of the trigger's pipelines may fail (onFailure Teardown
	// included) since it was created or last resumed before it starts nothing new: the
	// pipelines running go on, and the trigger waits for a person to resume it. Default 1:
	// a fleet policy stops at the first failure, because a cause that fails one object (a
	// wrong credential, a broken step) fails the next one too, and the trigger would
	// otherwise walk it through the fleet.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	FailureBudget int32 `json:"failureBudget,omitempty"`

	// Cooldown is the least time between a start of the trigger's pipelines and the next,
	// and between the end of one and the next start, so that caches refill and
	// replacement capacity settles: at most one pipeline starts per cooldown. At most 24h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|µs|ms|s|m|h))+$') && duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="cooldown must be at least 0s and at most 24h"
	Cooldown *metav1.Duration `json:"cooldown,omitempty"`

	// Pause, set, stops the trigger from starting pipelines (those running go on), saying
	// who and why: kubectl stepwise triggers pause sets it. The API server checks that By
	// is the user who sets it (the ValidatingAdmissionPolicy the operator installs).
	// +optional
	Pause *TriggerPause `json:"pause,omitempty"`

	// Resume, changed, resets the count of failed pipelines that the failure budget
	// counts: kubectl stepwise triggers resume clears pause and sets it. The API server
	// checks that By is the user who sets it.
	// +optional
	Resume *TriggerResume `json:"resume,omitempty"`

	// NodeBudgetRef, on a trigger of Nodes, names the NodeBudget its starts count against,
	// with every other trigger naming it: a pipeline starts only while the nodes
	// unavailable (NotReady, cordoned, or being retired under the budget) leave room for
	// its node. The trigger's ServiceAccount needs the verb "use" on the budget.
	// +optional
	NodeBudgetRef *NodeBudgetRef `json:"nodeBudgetRef,omitempty"`

	// Gates are health checks that must all hold before each start: a CEL condition over
	// objects the trigger's ServiceAccount lists, or a Prometheus query that must return
	// nothing. While one does not hold nothing starts (those running go on), and the
	// status says which and why.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Gates []HealthGate `json:"gates,omitempty"`
}

// HealthGate is a check that must hold before the trigger starts a pipeline.
// +kubebuilder:validation:XValidation:rule="has(self.objects) != has(self.prometheus)",message="a gate has exactly one of objects and prometheus"
type HealthGate struct {
	// Name names the gate in the status and messages.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Objects holds while a CEL condition over objects of a kind holds, listed as the
	// trigger's ServiceAccount.
	// +optional
	Objects *ObjectsGate `json:"objects,omitempty"`
	// Prometheus holds while a query against a Prometheus API returns no series, as an
	// alert rule does: ALERTS{alertname="NodeDown",alertstate="firing"}.
	// +optional
	Prometheus *PrometheusGate `json:"prometheus,omitempty"`
	// Deadline, set, is how long the gate may go on not holding (while the trigger has
	// something to start) before the trigger stops as a spent failure budget stops it:
	// nothing starts until a person resumes it. Unset: the trigger waits for the gate.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|µs|ms|s|m|h))+$') && duration(self) > duration('0s') && duration(self) <= duration('168h')",message="deadline must be more than 0s and at most 168h"
	Deadline *metav1.Duration `json:"deadline,omitempty"`
}

// ObjectsGate is a CEL condition over the objects of a kind.
// +kubebuilder:validation:XValidation:rule="!(self.resource.apiVersion == 'v1' && self.resource.kind == 'Secret')",message="a gate may not read Secrets: what a condition fails on is written to the trigger's status"
type ObjectsGate struct {
	// Resource is the kind listed: in the trigger's namespace for a namespaced kind,
	// cluster-wide for a cluster-scoped one. The trigger's ServiceAccount must be allowed
	// to list it.
	Resource TriggerResource `json:"resource"`
	// Selector chooses the objects by label; empty lists all of them (at most 1000).
	// +optional
	Selector *LabelSelector `json:"selector,omitempty"`
	// Condition is a CEL expression over objects, the list of the objects as JSON, that
	// gives true when the gate holds, e.g. every Deployment Available:
	// objects.all(d, d.status.conditions.exists(c, c.type == 'Available' && c.status == 'True')).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Condition string `json:"condition"`
}

// PrometheusGate is a query against a Prometheus-compatible API.
type PrometheusGate struct {
	// URL of the Prometheus API, e.g. http://prometheus.monitoring:9090. The operator
	// connects only where its egress policy allows (--plugin-allowed-cidrs).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url"`
	// Query is a PromQL query; the gate holds while it returns no series.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Query string `json:"query"`
}

// TriggerPause says who paused a trigger, and why.
type TriggerPause struct {
	// By is the user who paused it, as the API server authenticated them.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	By string `json:"by"`
	// Reason is why, in a few words (an incident's name).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason,omitempty"`
}

// TriggerResume says who resumed a trigger; ID tells one resume from the one before.
type TriggerResume struct {
	// By is the user who resumed it, as the API server authenticated them.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	By string `json:"by"`
	// ID is new for each resume (kubectl stepwise uses the time).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	ID string `json:"id"`
}

// FieldRequirement is a requirement on one field of an object: its value is among Values
// (In) or not (NotIn: also when the object lacks the field), or the field exists or not.
// A value compares as the text $(object.PATH) would give it ("true", "3", "node-1").
// +kubebuilder:validation:XValidation:rule="self.operator in ['In', 'NotIn'] ? has(self.values) && size(self.values) > 0 : !has(self.values) || size(self.values) == 0",message="values are required for In and NotIn, and not allowed for Exists and DoesNotExist"
type FieldRequirement struct {
	// Field is the field's path, as in $(object.PATH): spec.providerID,
	// metadata.annotations['example.com/pool'].
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Field string `json:"field"`
	// Operator is In, NotIn, Exists or DoesNotExist.
	Operator FieldOperator `json:"operator"`
	// Values for In and NotIn.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=1024
	Values []string `json:"values,omitempty"`
}

// FieldOperator relates a field to values.
// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
type FieldOperator string

// The field operators.
const (
	FieldIn           FieldOperator = "In"
	FieldNotIn        FieldOperator = "NotIn"
	FieldExists       FieldOperator = "Exists"
	FieldDoesNotExist FieldOperator = "DoesNotExist"
)

// MaintenanceWindow opens at every time of a cron schedule and stays open for a duration,
// as Karpenter's disruption budgets' schedules do.
type MaintenanceWindow struct {
	// Schedule is a standard five-field cron schedule (minute hour day month weekday) or a
	// descriptor such as @daily, e.g. "0 2 * * 1-5" for 02:00 on weekdays. No TZ= or
	// CRON_TZ= prefix: the time zone is timeZone.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|@every ([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+|[0-9A-Za-z*,/?-]+( +[0-9A-Za-z*,/?-]+){4})$`
	Schedule string `json:"schedule"`
	// Duration is how long the window stays open after each time of the schedule: more
	// than 0s, at most 168h.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|µs|ms|s|m|h))+$') && duration(self) > duration('0s') && duration(self) <= duration('168h')",message="duration must be more than 0s and at most 168h"
	Duration metav1.Duration `json:"duration"`
	// TimeZone of the schedule, an IANA name such as Europe/Berlin. Default: UTC.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$`
	// +kubebuilder:validation:XValidation:rule="self != 'Local'",message="timeZone names an IANA zone such as Europe/Berlin, or UTC; Local, the operator's own zone, is not one"
	TimeZone string `json:"timeZone,omitempty"`
}

// LabelSelector chooses objects by label, as metav1.LabelSelector does, with bounds the
// API server checks (metav1's own type has none in a CRD's schema).
type LabelSelector struct {
	// MatchLabels: every label must have the value.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && size(self[k]) <= 63)",message="label keys are at most 317 characters and values at most 63"
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	// MatchExpressions: every requirement must hold.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelectorRequirement relates a label to values. The API server refuses what the
// selector's parser would: a key or value that is no label's, values with Exists or
// DoesNotExist, none with In or NotIn (each would fail every drain or trigger that reads it).
// +kubebuilder:validation:XValidation:rule="self.operator in ['In', 'NotIn'] ? has(self.values) && size(self.values) > 0 : !has(self.values) || size(self.values) == 0",message="values are required with In and NotIn, and not allowed with Exists and DoesNotExist"
type LabelSelectorRequirement struct {
	// Key is the label's key: an optional DNS subdomain prefix and "/", and a name of at
	// most 63 characters.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$`
	Key string `json:"key"`
	// Operator relates the key to the values.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator metav1.LabelSelectorOperator `json:"operator"`
	// Values for In and NotIn; none for Exists and DoesNotExist.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	Values []string `json:"values,omitempty"`
}

// AsMeta is the selector as metav1.LabelSelector, for labels' parsers; nil stays nil.
func (s *LabelSelector) AsMeta() *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &metav1.LabelSelector{MatchLabels: s.MatchLabels}
	for _, e := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: e.Key, Operator: e.Operator, Values: e.Values,
		})
	}
	return out
}

// TriggerResource names a kind of object.
type TriggerResource struct {
	// APIVersion of the kind, e.g. v1 or example.com/v1.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	APIVersion string `json:"apiVersion"`
	// Kind, e.g. Node or WebApp.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
}

// UnmatchedPolicy says what becomes of a pipeline whose object went.
// +kubebuilder:validation:Enum=Keep;Delete
type UnmatchedPolicy string

const (
	// UnmatchedKeep keeps the pipeline as a record.
	UnmatchedKeep UnmatchedPolicy = "Keep"
	// UnmatchedDelete deletes the pipeline, which runs its teardown.
	UnmatchedDelete UnmatchedPolicy = "Delete"
)

// PipelineTriggerStatus is what the trigger sees and did.
type PipelineTriggerStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Matched counts the objects that match; Running the unfinished pipelines; Waiting
	// the matching objects without a pipeline yet; Succeeded and Failed the finished
	// pipelines.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Matched int32 `json:"matched,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Running int32 `json:"running,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Waiting int32 `json:"waiting,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Succeeded int32 `json:"succeeded,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Failed int32 `json:"failed,omitempty"`
	// AwaitingApproval counts the running pipelines whose step waits for approval
	// (kubectl stepwise approve --trigger NAME --all-waiting).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	AwaitingApproval int32 `json:"awaitingApproval,omitempty"`
	// NextWindow is when the maintenance window opens next, while it is closed.
	// +optional
	NextWindow *metav1.Time `json:"nextWindow,omitempty"`
	// Queue names the waiting objects in the order they will start (the first 50).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MaxLength=512
	Queue []string `json:"queue,omitempty"`
	// Failures are the trigger's pipelines that failed since it was created or last
	// resumed, in the order it saw them, up to its failure budget; when they fill it the
	// trigger starts nothing new.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Failures []TriggerFailure `json:"failures,omitempty"`
	// FailureBudgetLeft is how many more pipelines may fail before the trigger stops
	// starting new ones.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	FailureBudgetLeft int32 `json:"failureBudgetLeft,omitempty"`
	// Paused records the pause the trigger honours: by a person (spec.pause), with when
	// the trigger saw it.
	// +optional
	Paused *TriggerPauseRecord `json:"paused,omitempty"`
	// Resumed records the last resume the trigger saw, and when; the failures count from
	// then.
	// +optional
	Resumed *TriggerResumeRecord `json:"resumed,omitempty"`
	// LastStart is when the trigger last started a pipeline; with a cooldown the next
	// starts no earlier than LastStart + cooldown.
	// +optional
	LastStart *metav1.Time `json:"lastStart,omitempty"`
	// LastFinish is when the last of the trigger's pipelines finished; with a cooldown
	// the next starts no earlier than LastFinish + cooldown either.
	// +optional
	LastFinish *metav1.Time `json:"lastFinish,omitempty"`
	// Gates are the health gates as last checked, before a start.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Gates []TriggerGateStatus `json:"gates,omitempty"`
	// GateStop, set, is the gate that did not hold past its deadline: nothing starts
	// until a person resumes the trigger.
	// +optional
	GateStop *TriggerGateStop `json:"gateStop,omitempty"`
	// BlockedBy is what keeps the trigger from starting pipelines now (paused, its failure
	// budget spent, a gate, the NodeBudget, the window, its concurrency, PodDisruptionBudgets
	// its pipelines wait on), since when and what would let it go on. kubectl stepwise why
	// reads it.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	BlockedBy []Blocker `json:"blockedBy,omitempty"`
	// Conditions; "Ready" is True when the trigger can act (its template and resource are
	// usable and its ServiceAccount may list and watch the resource).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// TriggerFailure is a failed pipeline the failure budget counts.
type TriggerFailure struct {
	// Pipeline is the failed pipeline's name.
	// +kubebuilder:validation:MaxLength=253
	Pipeline string `json:"pipeline"`
	// UID of the pipeline, so that a pipeline of the same name made later counts anew.
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid"`
	// Object is the object the pipeline ran for, as the queue names it.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Object string `json:"object,omitempty"`
	// Step is the step that failed.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Step string `json:"step,omitempty"`
	// At is when the pipeline failed.
	At metav1.Time `json:"at"`
}

// TriggerGateStatus is a health gate as last checked.
type TriggerGateStatus struct {
	// Name of the gate.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Holds tells whether the gate held when last checked.
	Holds bool `json:"holds"`
	// Since is when the gate last turned to holding or not.
	Since metav1.Time `json:"since"`
	// Message says why the gate does not hold, or what checking it failed on.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// TriggerGateStop is a gate that did not hold past its deadline.
type TriggerGateStop struct {
	// Gate is the gate's name.
	// +kubebuilder:validation:MaxLength=63
	Gate string `json:"gate"`
	// Since is when the gate stopped holding.
	Since metav1.Time `json:"since"`
	// Message says why it did not hold.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// TriggerPauseRecord is a pause as the trigger saw it.
type TriggerPauseRecord struct {
	// By is who paused the trigger.
	// +kubebuilder:validation:MaxLength=512
	By string `json:"by"`
	// Reason is why.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason,omitempty"`
	// Since is when the trigger saw the pause.
	Since metav1.Time `json:"since"`
}

// TriggerResumeRecord is a resume as the trigger saw it.
type TriggerResumeRecord struct {
	// By is who resumed the trigger.
	// +kubebuilder:validation:MaxLength=512
	By string `json:"by"`
	// ID is the resume's spec.resume.id.
	// +kubebuilder:validation:MaxLength=64
	ID string `json:"id"`
	// At is when the trigger saw the resume.
	At metav1.Time `json:"at"`
}

// PipelineTriggerList is a list of PipelineTriggers.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type PipelineTriggerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []PipelineTrigger `json:"items"`
}
