package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/metrics"
)

// request builds what the hooks of step r, run by exec in direction d, are given, Secrets
// included: they are read here, once for the step's hooks of this sync, as the pipeline's
// ServiceAccount, for built-in and plugin executors alike. A teardown gets the parameters
// its run record holds; the other hooks get the spec's, resolved now and checked against
// the executor's declarations (before any hook runs: a step with a missing, mistyped or
// unknown parameter fails InvalidParameter), with their defaults.
func (ps *pipelineSync) request(ctx context.Context, r stepRef, exec executor.TaskExecutor, d direction) (*executor.Request, error) {
	decl := executor.Describe(exec).Parameters
	types := paramTypes(decl)
	outputs := make(map[string]map[string]string, r.index+2)
	earlier := make(map[string]map[string]string, max(r.index, 0))
	all := make(map[string]bool, len(ps.status.Steps))
	for j := range ps.status.Steps {
		s := &ps.status.Steps[j]
		all[s.Name] = true
		if j < r.index {
			earlier[s.Name] = s.Outputs
		}
		if j < r.index && len(s.Outputs) > 0 {
			outputs[s.Name] = s.Outputs
		}
	}
	if len(r.s.Outputs) > 0 {
		outputs[r.s.Name] = r.s.Outputs
	}

	var params map[string]string
	if !d.creating() && r.s.Ran != nil {
		// Recorded with its defaults; one recorded before the executor declared them gets
		// them now, and is not refused: what was created is torn down.
		params = contract.WithDefaults(decl, maps.Clone(r.s.Ran.Params))
	} else {
		res := &resolver{params: ps.params, earlier: earlier, all: all}
		resolved, err := res.resolveParams(r.step.With, types)
		if err != nil {
			return nil, err
		}
		if params, err = contract.CheckParams(decl, resolved); err != nil {
			return nil, err
		}
	}

	sa := ps.p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	clients, err := ps.env.clients.ForServiceAccount(ps.p.Namespace, sa)
	if err != nil {
		return nil, contract.Retryable("ClientError", fmt.Errorf("clients for service account %s/%s: %w", ps.p.Namespace, sa, err))
	}
	secrets, secretParams, err := readSecrets(ctx, clients, ps.p.Namespace, params, types)
	if err != nil {
		return nil, err
	}
	return &executor.Request{
		Request: contract.Request{
			Pipeline: contract.PipelineRef{
				Namespace: ps.p.Namespace, Name: ps.p.Name, UID: string(ps.p.UID), Generation: ps.p.Generation,
			},
			ServiceAccountName: sa,
			Step:               r.s.Name,
			Params:             params,
			Outputs:            outputs,
			Secrets:            secrets,
			SecretParams:       secretParams,
		},
		Clients: clients,
	}, nil
}

// callHook runs one hook with the attempt's deadline (guarded), and removes the values of
// the step's Secrets from what it returns, whoever the executor is: the status, Events and
// the log never see them.
func (ps *pipelineSync) callHook(ctx context.Context, exec executor.TaskExecutor, req *executor.Request, deadline time.Time) (contract.Result, error) {
	start := time.Now()
	ctx, endSpan := ps.startHookSpan(ctx, exec, req)
	res, err := guarded(ctx, exec, deadline, ps.env.hookCallTimeout, func(ctx context.Context) (contract.Result, error) {
		return executor.RunHook(ctx, exec, req)
	})
	redact := req.Redactor()
	res, err = redact.Result(res), redact.Error(err)
	endSpan(err) // redacted: a Secret's value reaches no span
	result := metrics.HookDone
	switch {
	case err != nil:
		result = metrics.HookError
	case !res.Done:
		result = metrics.HookWait
	}
	ps.env.metrics.ObserveHook(exec.Name(), string(req.Hook), result, time.Since(start))
	klog.FromContext(ctx).V(4).Info("Hook called", "hook", req.Hook, "attempt", req.Attempt,
		"result", result, "duration", time.Since(start), "err", err)
	return res, err
}

// errCallBound is the cause of a call's context that reached the engine's bound on one
// call (rather than the attempt's deadline).
var errCallBound = errors.New("the engine's bound on one hook call")

// guarded calls f with a context ending at deadline and, when bound is not 0, at most
// bound from now, turning a panic into an error so that one bad executor cannot take the
// operator down. A call that reaches bound fails retryably with reason HookCallTimeout:
// whatever the step's timeout, a call that does not answer (an endpoint that accepts the
// connection and never replies) frees its worker after bound, and long work returns Wait.
func guarded[T any](ctx context.Context, exec executor.TaskExecutor, deadline time.Time, bound time.Duration, f func(context.Context) (T, error)) (out T, err error) {
	// One context for both ends (one timer a call): whichever comes first, with its cause.
	var cancel context.CancelFunc
	if end := time.Now().Add(bound); bound > 0 && end.Before(deadline) {
		ctx, cancel = context.WithDeadlineCause(ctx, end, errCallBound)
	} else {
		ctx, cancel = context.WithDeadline(ctx, deadline)
	}
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			var zero T
			out, err = zero, fmt.Errorf("executor %s panicked: %v", exec.Name(), p)
		}
	}()
	out, err = f(ctx)
	if err != nil && errors.Is(context.Cause(ctx), errCallBound) {
		err = contract.Retryable(contract.ReasonHookCallTimeout, fmt.Errorf(
			"the call did not answer within %s, the engine's bound on one call (--hook-call-timeout): "+
				"an executor's long work must return Wait and be asked again", bound))
	}
	return out, err
}

// paramTypes are the declared types of parameters, by name.
func paramTypes(params []contract.Parameter) map[string]contract.ParamType {
	types := make(map[string]contract.ParamType, len(params))
	for _, p := range params {
		types[p.Name] = p.Type
	}
	return types
}
