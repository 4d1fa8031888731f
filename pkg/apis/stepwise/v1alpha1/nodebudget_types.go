package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeBudget bounds how many nodes of the cluster may be unavailable at once, whichever
// triggers retire them: "at most 3 nodes unavailable". A node counts when it is NotReady,
// unschedulable (cordoned, by anyone), or when a trigger naming the budget runs a pipeline
// for it. Triggers on Nodes name it in spec.nodeBudgetRef; together they never start a
// pipeline that would take one more node than the budget allows. Its owner decides who
// may use it: a trigger's ServiceAccount needs the verb "use" on it (RBAC), as
// PodSecurityPolicies once did.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=swnb,categories=stepwise
// +kubebuilder:printcolumn:name="Max unavailable",type=integer,JSONPath=`.spec.maxUnavailable`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeBudget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NodeBudgetSpec `json:"spec"`
}

// NodeBudgetSpec says how many of which nodes may be unavailable at once.
type NodeBudgetSpec struct {
	// MaxUnavailable is how many of the nodes may be unavailable at once, counting those
	// NotReady or cordoned already. 0 starts nothing: a switch that holds every trigger
	// using the budget.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	MaxUnavailable int32 `json:"maxUnavailable"`

	// NodeSelector chooses the nodes the budget counts; empty counts every node. A node
	// a trigger retires under the budget counts whether or not it matches.
	// +optional
	NodeSelector *LabelSelector `json:"nodeSelector,omitempty"`
}

// NodeBudgetRef names a NodeBudget.
type NodeBudgetRef struct {
	// Name of the NodeBudget.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// NodeBudgetList is a list of NodeBudgets.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type NodeBudgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []NodeBudget `json:"items"`
}
