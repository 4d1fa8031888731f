package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DrainRule tells every node.drain in the cluster what to do with the pods it selects:
// "drain the Ceph OSDs last", "leave the node-local cache", "wait for batch jobs to
// complete", written once by whoever owns the cluster's drains. A drain decides each pod
// by the label stepwise.dev/drain=skip first, then by the DrainRules (by name), then by its
// step's rules parameter; a pod none selects is drained first. The operator reads the
// rules itself: a tenant's ServiceAccount needs no right to them, and cannot hide them.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=swdr,categories=stepwise
// +kubebuilder:printcolumn:name="Behavior",type=string,JSONPath=`.spec.behavior`
// +kubebuilder:printcolumn:name="Order",type=integer,JSONPath=`.spec.order`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DrainRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec DrainRuleSpec `json:"spec"`
}

// DrainBehavior is what a drain does with the pods a rule selects.
// +kubebuilder:validation:Enum=Drain;Skip;WaitCompleted
type DrainBehavior string

const (
	// DrainBehaviorDrain evicts the pods, in the rule's order: every pod of a lower order
	// is gone before one of a higher order is evicted.
	DrainBehaviorDrain DrainBehavior = "Drain"
	// DrainBehaviorSkip leaves the pods on the node; the drain ends without them.
	DrainBehaviorSkip DrainBehavior = "Skip"
	// DrainBehaviorWaitCompleted evicts nothing: the drain waits until the pods complete.
	DrainBehaviorWaitCompleted DrainBehavior = "WaitCompleted"
)

// DrainRuleSpec selects pods, by their labels, their namespace and the labels of the node
// drained, and says what a drain does with them. A selector left out selects everything.
// +kubebuilder:validation:XValidation:rule="!has(self.order) || self.order == 0 || self.behavior == 'Drain'",message="an order goes with behavior Drain only"
type DrainRuleSpec struct {
	// Behavior is what the drain does with the pods: Drain (evict, in order), Skip
	// (leave) or WaitCompleted (wait until they complete).
	Behavior DrainBehavior `json:"behavior"`

	// Order of the pods a Drain rule selects: lower first; pods no rule selects have 0.
	// +optional
	// +kubebuilder:validation:Minimum=-1000
	// +kubebuilder:validation:Maximum=1000
	Order int32 `json:"order,omitempty"`

	// PodSelector selects pods by their labels.
	// +optional
	PodSelector *LabelSelector `json:"podSelector,omitempty"`

	// Namespaces selects pods by their namespace's name.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Namespaces []string `json:"namespaces,omitempty"`

	// NodeSelector makes the rule apply on the nodes whose labels it selects only.
	// +optional
	NodeSelector *LabelSelector `json:"nodeSelector,omitempty"`
}

// DrainLabel on a pod set to DrainSkip leaves the pod on its node when node.drain drains
// it, whatever the rules say.
const (
	DrainLabel = "stepwise.dev/drain"
	DrainSkip  = "skip"
)

// DrainRuleList is a list of DrainRules.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type DrainRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []DrainRule `json:"items"`
}
