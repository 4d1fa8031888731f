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

var (
	_ executor.TaskExecutor = (*pluginExecutor)(nil)
	_ executor.Planner      = (*pluginExecutor)(nil)
)

func newPluginExecutor(proc *process, info *proto.ExecutorInfo) *pluginExecutor {
	e := &pluginExecutor{proc: proc, info: info}
	e.Func = executor.Func{ExecutorName: info.GetName(), Run: e.run}
	return e
}

// Info is what the plugin said about the executor.
func (e *pluginExecutor) Info() *proto.ExecutorInfo { return e.info }

func (e *pluginExecutor) run(ctx context.Context, req *executor.Request) (contract.Result, error) {
	in, err := proto.EncodeRequest(e.info.GetName(), &req.Request)
	if err != nil {
		return contract.Result{}, err
	}
	rpc, err := e.proc.conn()
	if err != nil {
		return contract.Result{}, err
	}
	// The context carries the attempt's deadline to the plugin.
	resp, err := rpc.RunHook(ctx, in)
	if err != nil {
		return contract.Result{}, e.callError(ctx, rpc, err)
	}
	e.proc.ok()
	res, err := proto.DecodeOutcome(resp)
	if errors.Is(err, proto.ErrNoOutcome) {
		return contract.Result{}, contract.Retryable(ReasonPluginProtocolError, fmt.Errorf("plugin %s: %w", e.proc.name, err))
	}
	return res, err
}

// callError turns a failed gRPC call into the engine's error. The caller's deadline or
// cancellation stays that (reason Timeout). The process is replaced only when it died or
// its connection is gone: the plugin serves every tenant, and one call's failure (an
// answer it could not encode, a message over the size limit) must not end the others'.
func (e *pluginExecutor) callError(ctx context.Context, rpc proto.ExecutorClient, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("plugin %s: executor %s: %w", e.proc.name, e.info.GetName(), ctxErr)
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.DeadlineExceeded:
		return fmt.Errorf("plugin %s: %w", e.proc.name, context.DeadlineExceeded)
	case codes.Canceled:
		return fmt.Errorf("plugin %s: %w", e.proc.name, context.Canceled)
	case codes.ResourceExhausted:
		return contract.Permanent(proto.ReasonMessageTooLarge, fmt.Errorf("plugin %s: executor %s: %s", e.proc.name, e.info.GetName(), st.Message()))
	}
	if died, why := e.proc.exited(rpc); died {
		e.proc.logger.Error(err, "Plugin died during a hook; it is restarted on the next call", "executor", e.info.GetName(), "why", why)
		if why != "" {
			why = ", " + why
		}
		return contract.Retryable(ReasonPluginUnavailable, fmt.Errorf("plugin %s died during the hook%s (it is restarted on the next call): %s", e.proc.name, why, st.Message()))
	}
	if st.Code() == codes.Unavailable {
		// Alive but unreachable: no call can get through, so start a new one.
		e.proc.broken(rpc)
		e.proc.logger.Error(err, "Plugin connection lost; the plugin is restarted on the next call", "executor", e.info.GetName())
		return contract.Retryable(ReasonPluginUnavailable, fmt.Errorf("plugin %s: connection lost (it is restarted on the next call): %s", e.proc.name, st.Message()))
	}
	// The process serves on: this call alone failed, the same way each time it is made.
	return contract.Permanent(ReasonPluginProtocolError, fmt.Errorf("plugin %s: executor %s: %s", e.proc.name, e.info.GetName(), st.Message()))
}

// Plan asks the plugin what the executor's creation hooks would do. A plugin of a protocol
// before version 3 cannot say: it would run, with no details.
func (e *pluginExecutor) Plan(ctx context.Context, req *executor.Request) (contract.Plan, error) {
	in, err := proto.EncodeRequest(e.info.GetName(), &req.Request)
	if err != nil {
		return contract.Plan{}, err
	}
	rpc, err := e.proc.conn()
	if err != nil {
		return contract.Plan{}, err
	}
	if e.proc.protocolVersion() < proto.Version3 {
		return contract.NoPlan(), nil
	}
	resp, err := rpc.Plan(ctx, in)
	if err != nil {
		return contract.Plan{}, e.callError(ctx, rpc, err)
	}
	e.proc.ok()
	p, err := proto.DecodePlanOutcome(resp)
	if errors.Is(err, proto.ErrNoOutcome) {
		return contract.Plan{}, contract.Retryable(ReasonPluginProtocolError, fmt.Errorf("plugin %s: %w", e.proc.name, err))
	}
	return p, err
}
