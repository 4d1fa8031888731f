// Package historyapi serves the archive of finished pipelines (pkg/archive) as the
// aggregated API history.stepwise.dev/v1alpha1, resource pipelinerecords, with the
// generic API server of k8s.io/apiserver: the kube-apiserver's aggregation layer forwards
// the requests, and authentication and authorization are delegated back to it, so the
// cluster's RBAC on pipelinerecords decides who reads which namespace's records, and
// kubectl get shows them as a table the server prints.
//
// It is read-only, get and list: a record is the operator's account of what happened to
// a pipeline, written once when the pipeline reached a state. Letting anyone create,
// change or delete one would make the archive an account of what someone said happened;
// retention of the archive itself is the operator's job. Nothing changes, so there is no
// watch either, and no etcd, admission or resourceVersion.
package historyapi
