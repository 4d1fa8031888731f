package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
)

// pluginExecutor is the TaskExecutor of one executor a plugin serves: it translates the
// engine's Request, Result and errors to and from the protocol.
type pluginExecutor struct {
	proc *process
	info *proto.ExecutorInfo
}

var _ executor.TaskExecutor = (*pluginExecutor)(nil)

func (e *pluginExecutor) Name() string { return e.info.GetName() }

// Info is what the plugin said about the executor.
func (e *pluginExecutor) Info() *proto.ExecutorInfo { return e.info }

func (e *pluginExecutor) PreCreate(ctx context.Context, req *executor.Request) (executor.Result, error) {
	return e.run(ctx, proto.Hook_HOOK_PRE_CREATE, req)
}

func (e *pluginExecutor) Create(ctx context.Context, req *executor.Request) (executor.Result, error) {
	return e.run(ctx, proto.Hook_HOOK_CREATE, req)
}

func (e *pluginExecutor) PostCreate(ctx context.Context, req *executor.Request) (executor.Result, error) {
	return e.run(ctx, proto.Hook_HOOK_POST_CREATE, req)
}

func (e *pluginExecutor) PreDelete(ctx context.Context, req *executor.Request) (executor.Result, error) {
	return e.run(ctx, proto.Hook_HOOK_PRE_DELETE, req)
}

func (e *pluginExecutor) Delete(ctx context.Context, req *executor.Request) (executor.Result, error) {
	return e.run(ctx, proto.Hook_HOOK_DELETE, req)
}

func (e *pluginExecutor) PostDelete(ctx context.Context, req *executor.Request) (executor.Result, error) {
	return e.run(ctx, proto.Hook_HOOK_POST_DELETE, req)
}

// HookFor maps an engine hook to the protocol's.
func HookFor(h v1alpha1.Hook) proto.Hook {
	switch h {
	case v1alpha1.HookPreCreate:
		return proto.Hook_HOOK_PRE_CREATE
	case v1alpha1.HookCreate:
		return proto.Hook_HOOK_CREATE
	case v1alpha1.HookPostCreate:
		return proto.Hook_HOOK_POST_CREATE
	case v1alpha1.HookPreDelete:
		return proto.Hook_HOOK_PRE_DELETE
	case v1alpha1.HookDelete:
		return proto.Hook_HOOK_DELETE
	case v1alpha1.HookPostDelete:
		return proto.Hook_HOOK_POST_DELETE
	}
	return proto.Hook_HOOK_UNSPECIFIED
}

func (e *pluginExecutor) run(ctx context.Context, hook proto.Hook, req *executor.Request) (executor.Result, error) {
	secrets, err := resolveSecrets(ctx, req)
	if err != nil {
		return executor.Result{}, err
	}
	in := &proto.RunHookRequest{
		Executor: e.info.GetName(),
		Hook:     hook,
		Pipeline: &proto.PipelineRef{
			Namespace: req.Pipeline.Namespace, Name: req.Pipeline.Name,
			Uid: string(req.Pipeline.UID), Generation: req.Pipeline.Generation,
		},
		Step:           req.Step,
		Params:         req.Params,
		Attempt:        req.Attempt,
		IdempotencyKey: req.IdempotencyKey,
		Secrets:        secrets,
	}
	if len(req.Outputs) > 0 {
		in.Outputs = make(map[string]*proto.StepOutputs, len(req.Outputs))
		for step, o := range req.Outputs {
			in.Outputs[step] = &proto.StepOutputs{Values: o}
		}
	}
	rpc, err := e.proc.conn()
	if err != nil {
		return executor.Result{}, err
	}
	// The context carries the attempt's deadline to the plugin.
	resp, err := rpc.RunHook(ctx, in)
	if err != nil {
		return executor.Result{}, e.callError(ctx, rpc, err)
	}
	e.proc.ok()
	switch out := resp.GetOutcome().(type) {
	case *proto.RunHookResponse_Result:
		r := out.Result
		return executor.Result{
			Done: r.GetDone(), RequeueAfter: time.Duration(r.GetRequeueAfterNanos()),
			Outputs: r.GetOutputs(), Message: r.GetMessage(),
		}, nil
	case *proto.RunHookResponse_Error:
		reason := out.Error.GetReason()
		if reason == "" {
			reason = executor.ReasonHookFailed
		}
		cause := errors.New(out.Error.GetMessage())
		if out.Error.GetPermanent() {
			return executor.Result{}, executor.Permanent(reason, cause)
		}
		return executor.Result{}, executor.Retryable(reason, cause)
	default:
		return executor.Result{}, executor.Retryable("PluginProtocolError", fmt.Errorf("plugin %s returned neither a result nor an error", e.proc.name))
	}
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
		return executor.Retryable(ReasonPluginUnavailable, fmt.Errorf("plugin %s died during the hook (it is restarted on the next call): %s", e.proc.name, status.Convert(err).Message()))
	}
	return executor.Retryable(ReasonPluginUnavailable, fmt.Errorf("plugin %s: %w", e.proc.name, err))
}

// SecretSuffix marks the parameters that name a Secret: credentialsSecret, tokenSecret…
const SecretSuffix = "Secret"

// resolveSecrets reads the Secrets named by the step's parameters ending in "Secret",
// in the pipeline's namespace, as the pipeline's service account. Their data is merged
// by key (in parameter-name order) and never logged.
func resolveSecrets(ctx context.Context, req *executor.Request) (map[string][]byte, error) {
	var names []string
	for _, k := range slices.Sorted(maps.Keys(req.Params)) {
		if strings.HasSuffix(k, SecretSuffix) && req.Params[k] != "" {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	if req.Clients == nil || req.Clients.Kube == nil {
		return nil, executor.Permanent("SecretUnavailable", errors.New("no Kubernetes client to read the step's Secrets"))
	}
	out := map[string][]byte{}
	for _, param := range names {
		s, err := req.Clients.Kube.CoreV1().Secrets(req.Pipeline.Namespace).Get(ctx, req.Params[param], metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil, executor.Retryable("SecretNotFound", fmt.Errorf("parameter %s: Secret %s/%s not found", param, req.Pipeline.Namespace, req.Params[param]))
			}
			return nil, fmt.Errorf("parameter %s: read Secret %s/%s: %w", param, req.Pipeline.Namespace, req.Params[param], err)
		}
		for k, v := range s.Data {
			out[k] = v
		}
		for k, v := range s.StringData {
			out[k] = []byte(v)
		}
	}
	return out, nil
}
