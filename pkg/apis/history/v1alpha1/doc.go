// +k8s:deepcopy-gen=package
// +groupName=history.stepwise.dev

// Package v1alpha1 is the v1alpha1 version of the history.stepwise.dev API: PipelineRecord,
// what the archive keeps of one state of a pipeline. It is not a CustomResourceDefinition:
// the operator serves it from its archive (PostgreSQL) through the aggregation layer, so
// the API server's RBAC decides who reads which namespace's records.
package v1alpha1
