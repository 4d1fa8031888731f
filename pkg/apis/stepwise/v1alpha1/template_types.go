package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PipelineTemplate declares parameters and the steps a Pipeline runs with them: a
// Pipeline with spec.templateRef, made by hand, by `kubectl stepwise run`, or by a
// PipelineTrigger for every object that matches.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=swtpl,categories=stepwise
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PipelineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PipelineTemplateSpec `json:"spec"`
}

// PipelineTemplateSpec is a template's parameters and steps.
//
// +kubebuilder:validation:XValidation:rule="self.steps.all(s, self.steps.exists_one(t, t.name == s.name))",message="step names must be unique"
// +kubebuilder:validation:XValidation:rule="!has(self.params) || self.params.all(p, self.params.exists_one(q, q.name == p.name))",message="parameter names must be unique"
// +kubebuilder:validation:XValidation:rule="(has(self.params) ? self.params.map(p, size(p.name) + (has(p.default) ? size(p.default) : 0)).sum() : 0) + self.steps.map(s, has(s.with) ? s.with.map(k, size(k) + size(s.with[k])).sum() : 0).sum() <= 262144",message="the names and defaults of params and the names and values of every step's with are at most 262144 characters together"
type PipelineTemplateSpec struct {
	// Params the steps refer to as $(params.NAME).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Params []TemplateParam `json:"params,omitempty"`

	// Steps are what a Pipeline of this template runs, as a Pipeline's steps.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	Steps []Step `json:"steps"`

	// OnFailure is the onFailure of the Pipelines of this template that set none.
	// +optional
	OnFailure FailurePolicy `json:"onFailure,omitempty"`

	// Retention is the retention of the Pipelines of this template that set none
	// (PipelineSpec.Retention): they are removed once archived and finished this long,
	// without a teardown.
	// +optional
	Retention *Retention `json:"retention,omitempty"`
}

// TemplateParam declares one parameter of a template.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.required) && self.required && has(self.default))",message="a required parameter has no default"
type TemplateParam struct {
	// Name, as steps refer to it: $(params.NAME).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_-]*$`
	Name string `json:"name"`

	// Description says what the parameter is for.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// Required parameters must be given by the Pipeline.
	// +optional
	Required bool `json:"required,omitempty"`

	// Default is the value of a parameter the Pipeline does not give.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	Default *string `json:"default,omitempty"`
}

// PipelineTemplateList is a list of PipelineTemplates.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type PipelineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []PipelineTemplate `json:"items"`
}
