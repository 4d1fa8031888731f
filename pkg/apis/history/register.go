// Package history holds the history.stepwise.dev API group: the archive of finished
// pipelines, served read-only by the operator through the API server's aggregation layer.
package history

// GroupName is the group of the archive's API.
const GroupName = "history.stepwise.dev"
