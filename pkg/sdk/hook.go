package sdk

import (
	"context"
	"fmt"
	"go.opentelemetry.io/otel/trace"
	"io"
	"runtime/debug"
	"slices"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// runHook runs the hook of e that req.Hook names (contract.RunHook), as the engine expects
// of every executor: the parameters are checked against e's declarations first, with the
// defaults of those not set (paramsFor); the hook's context carries a Logger writing to
// logs and the pipeline's namespace (TenantFrom); a panic becomes an error; and every
// Secret value given to the call is removed from the answer, error text included, before
// it leaves the plugin.
func runHook(ctx context.Context, e Executor, req *Request, logs io.Writer) (Result, error) {
	redactor := req.Redactor()
	res, err := guarded(ctx, e, req, logs, redactor, paramsFor, func(ctx context.Context, req *Request) (Result, error) {
		return contract.RunHook[*Request](ctx, e, req.Hook, req)
	})
	return redactor.Result(res), redactor.Error(err)
}

// runPlan asks e what its creation hooks would do, as runHook runs a hook: the parameters
// checked as for Create, a Logger, a panic turned into an error, the Secrets removed. An
// executor that cannot plan answers contract.NoPlan.
func runPlan(ctx context.Context, e Executor, req *Request, logs io.Writer) (Plan, error) {
	redactor := req.Redactor()
	checkAsCreate := func(decl []Parameter, req *Request) (map[string]string, error) {
		return contract.CheckParams(decl, req.Params)
	}
	plan := func(ctx context.Context, req *Request) (Plan, error) {
		if planner, ok := e.(Planner); ok {
			return planner.Plan(ctx, req)
		}
		return contract.NoPlan(), nil
	}
	p, err := guarded(ctx, e, req, logs, redactor, checkAsCreate, plan)
	return redactor.Plan(p), redactor.Error(err)
}

// guarded calls f with req's parameters as params gives them and, in its context, a
// Logger and the pipeline's namespace (TenantFrom), recovering from its panic; the
// caller's request stays as it was.
func guarded[T any](ctx context.Context, e Executor, req *Request, logs io.Writer, redactor Redactor,
	params func([]Parameter, *Request) (map[string]string, error), f func(context.Context, *Request) (T, error)) (out T, err error) {
	logger := newHookLogger(logs, redactor, e.Name(), req)
	// The call's span (the operator's trace, carried over gRPC): the hook's log lines name
	// its trace, and sdkhttp's requests carry it on.
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		logger = logger.With("trace_id", sc.TraceID().String())
	}
	defer func() {
		if p := recover(); p != nil {
			// The error goes to the step's status; the stack only to the log.
			logger.Error("hook panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			var zero T
			out, err = zero, fmt.Errorf("executor %s panicked: %v", e.Name(), p)
		}
	}()
	checked := *req
	if checked.Params, err = params(e.Describe().Parameters, req); err != nil {
		var zero T
		return zero, err
	}
	return f(WithTenant(withLogger(ctx, logger), req.Pipeline.Namespace), &checked)
}

// paramsFor is what the hook of req sees of its parameters, as the engine gives them: a
// creation hook's are checked (contract.CheckParams: a failure is a permanent
// InvalidParameter, and the hook is not called), a teardown hook's only get their
// defaults, for what was created under older declarations is torn down all the same. A
// hook the contract does not know gets them as they are: contract.RunHook refuses it.
func paramsFor(decl []Parameter, req *Request) (map[string]string, error) {
	switch {
	case slices.Contains(contract.CreationHooks(), req.Hook):
		return contract.CheckParams(decl, req.Params)
	case slices.Contains(contract.TeardownHooks(), req.Hook):
		return contract.WithDefaults(decl, req.Params), nil
	default:
		return req.Params, nil
	}
}
