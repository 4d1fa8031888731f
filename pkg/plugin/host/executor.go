package host

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
)

// pluginExecutor is one executor a plugin serves. It is a TaskExecutor through
// executor.Func (run handles every hook, which the request names) and translates with the
// protocol's codec; Secrets come resolved in the request, from the engine.
type pluginExecutor struct {
	executor.Func
	proc *process
	info *proto.ExecutorInfo
}

var _ executor.TaskExecutor = (*pluginExecutor)(nil)

func newPluginExecutor(proc *process, info *proto.ExecutorInfo) *pluginExecutor {
	e := &pluginExecutor{proc: proc, info: info}
	e.Func = executor.Func{ExecutorName: info.GetName(), Run: e.run}
	return e
}

// Info is what the plugin said about the executor.
func (e *pluginExecutor) Info() *proto.ExecutorInfo { return e.info }

func (e *pluginExecutor) run(ctx context.Context, req *executor.Request) (contract.Result, error) {
	rpc, err := e.proc.conn()
	if err != nil {
		return contract.Result{}, err
	}
	// The context carries the attempt's deadline to the plugin.
	resp, err := rpc.RunHook(ctx, proto.EncodeRequest(e.info.GetName(), &req.Request))
	if err != nil {
		return contract.Result{}, e.callError(ctx, rpc, err)
	}
	e.proc.ok()
	res, err := proto.DecodeOutcome(resp)
	if errors.Is(err, proto.ErrNoOutcome) {
		return contract.Result{}, contract.Retryable("PluginProtocolError", fmt.Errorf("plugin %s: %w", e.proc.name, err))
	}
	return res, err
}

// callError turns a failed gRPC call into the engine's error: the caller's deadline or
// cancellation stays that (reason Timeout); a dead plugin or connection is retryable with
// reason PluginUnavailable, and the process is replaced on the next call.
func (e *pluginExecutor) callError(ctx context.Context, rpc proto.ExecutorClient, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("plugin %s: executor %s: %w", e.proc.name, e.info.GetName(), ctxErr)
	}
	code := status.Code(err)
	switch code {
	case codes.DeadlineExceeded:
		return fmt.Errorf("plugin %s: %w", e.proc.name, context.DeadlineExceeded)
	case codes.Canceled:
		return fmt.Errorf("plugin %s: %w", e.proc.name, context.Canceled)
	}
	e.proc.broken(rpc)
	if code == codes.Unavailable || code == codes.Internal || code == codes.Unknown {
		e.proc.logger.Error(err, "Plugin died during a hook; it is restarted on the next call", "executor", e.info.GetName())
		return contract.Retryable(ReasonPluginUnavailable, fmt.Errorf("plugin %s died during the hook (it is restarted on the next call): %s", e.proc.name, status.Convert(err).Message()))
	}
	return contract.Retryable(ReasonPluginUnavailable, fmt.Errorf("plugin %s: %w", e.proc.name, err))
}
