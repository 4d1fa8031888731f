package host

import (
	"context"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/plugin/client"
)

// pluginExecutor is one executor a plugin serves. It is a TaskExecutor through
// executor.Func (run handles every hook, which the request names) and calls the plugin
// through its process's client; Secrets come resolved in the request, from the engine.
type pluginExecutor struct {
	executor.Func
	proc      *process
	described client.Executor
}

var (
	_ executor.TaskExecutor = (*pluginExecutor)(nil)
	_ executor.Planner      = (*pluginExecutor)(nil)
)

func newPluginExecutor(proc *process, described client.Executor) *pluginExecutor {
	e := &pluginExecutor{proc: proc, described: described}
	e.Func = executor.Func{ExecutorName: described.Name, Run: e.run}
	return e
}

func (e *pluginExecutor) run(ctx context.Context, req *executor.Request) (contract.Result, error) {
	c, err := e.proc.conn()
	if err != nil {
		return contract.Result{}, err
	}
	res, err := c.Run(ctx, e.Name(), &req.Request)
	e.proc.settle(c, e.Name(), err)
	return res, err
}

// Plan asks the plugin what the executor's creation hooks would do.
func (e *pluginExecutor) Plan(ctx context.Context, req *executor.Request) (contract.Plan, error) {
	c, err := e.proc.conn()
	if err != nil {
		return contract.Plan{}, err
	}
	p, err := c.Plan(ctx, e.Name(), &req.Request)
	e.proc.settle(c, e.Name(), err)
	return p, err
}
