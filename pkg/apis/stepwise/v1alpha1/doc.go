// +k8s:deepcopy-gen=package
// +groupName=stepwise.dev

// Package v1alpha1 is the v1alpha1 version of the stepwise.dev API: the Pipeline resource.
package v1alpha1
