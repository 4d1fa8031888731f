package sdk

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// runHook runs the hook of e that req.Hook names (contract.RunHook), as the engine expects
// of every executor: the parameters are checked against e's declarations first, with the
// defaults of those not set (paramsFor); the hook's context carries a Logger writing to
// logs; a panic becomes an error; and every Secret value given to the call is removed
// from the answer, error text included, before it leaves the plugin.
func runHook(ctx context.Context, e Executor, req *Request, logs io.Writer) (Result, error) {
	redactor := req.Redactor()
	res, err := callHook(ctx, e, req, logs, redactor)
	return redactor.Result(res), redactor.Error(err)
}

// callHook checks the parameters and calls the hook, recovering from its panic.
func callHook(ctx context.Context, e Executor, req *Request, logs io.Writer, redactor Redactor) (res Result, err error) {
	logger := newHookLogger(logs, redactor, e.Name(), req)
	defer func() {
		if p := recover(); p != nil {
			// The error goes to the step's status; the stack only to the log.
			logger.Error("hook panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			res, err = Result{}, fmt.Errorf("executor %s panicked: %v", e.Name(), p)
		}
	}()
	params, err := paramsFor(e.Describe().Parameters, req)
	if err != nil {
		return Result{}, err
	}
	checked := *req // the caller's request stays as it was
	checked.Params = params
	return contract.RunHook[*Request](withLogger(ctx, logger), e, checked.Hook, &checked)
}

// paramsFor is what the hook of req sees of its parameters, as the engine gives them: a
// creation hook's are checked (contract.CheckParams: a failure is a permanent
// InvalidParameter, and the hook is not called), a teardown hook's only get their
// defaults, for what was created under older declarations is torn down all the same. A
// hook the contract does not know gets them as they are: contract.RunHook refuses it.
func paramsFor(decl []Parameter, req *Request) (map[string]string, error) {
	switch req.Hook {
	case HookPreCreate, HookCreate, HookPostCreate:
		return contract.CheckParams(decl, req.Params)
	case HookPreDelete, HookDelete, HookPostDelete:
		return contract.WithDefaults(decl, req.Params), nil
	default:
		return req.Params, nil
	}
}
