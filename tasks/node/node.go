// Package node holds the built-in executors that retire a node: node.cordon, node.drain and
// node.delete. They act through the client the engine gives them, which impersonates the
// pipeline's ServiceAccount, and never block: a drain evicts what it can and asks to be
// looked at again.
package node

import (
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// Executors returns the node executors; node.drain follows the cluster's DrainRules that
// rules read (nil: none).
func Executors(rules *DrainRules) []executor.TaskExecutor {
	return []executor.TaskExecutor{Cordon{}, Drain{Rules: rules}, Delete{}}
}

// Each node executor tells what it would do (spec.dryRun).
var _ = []executor.Planner{Cordon{}, Drain{}, Delete{}}

// CordonedByAnnotation marks a node this engine cordoned, with the pipeline's UID, so that
// only that pipeline's teardown uncordons it, even if a retried hook saw it cordoned already.
const CordonedByAnnotation = "stepwise.dev/cordoned-by"

// nodeParam declares the parameter every node executor takes.
func nodeParam() contract.Parameter {
	return contract.Parameter{Name: "node", Description: "Name of the Node.", Required: true, Type: contract.ParamString}
}
