package controller

import (
	"context"
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
// its run record holds; the other hooks get the spec's, resolved now.
func (ps *pipelineSync) request(ctx context.Context, r stepRef, exec executor.TaskExecutor, d direction) (*executor.Request, error) {
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
		params = maps.Clone(r.s.Ran.Params)
	} else {
		res := &resolver{params: ps.params, earlier: earlier, all: all}
		var err error
		if params, err = res.resolveParams(r.step.With, paramTypes(exec)); err != nil {
			return nil, err
		}
	}

	sa := ps.p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	clients, err := ps.c.clients.ForServiceAccount(ps.p.Namespace, sa)
	if err != nil {
		return nil, contract.Retryable("ClientError", fmt.Errorf("clients for service account %s/%s: %w", ps.p.Namespace, sa, err))
	}
	secrets, err := readSecrets(ctx, clients, ps.p.Namespace, params)
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
		},
		Clients: clients,
	}, nil
}

// callHook runs one hook with the attempt's deadline, turning a panic into an error so
// that one bad executor cannot take the operator down.
func (ps *pipelineSync) callHook(ctx context.Context, exec executor.TaskExecutor, req *executor.Request, deadline time.Time) (res contract.Result, err error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			res, err = contract.Result{}, fmt.Errorf("executor %s panicked: %v", exec.Name(), p)
		}
		result := metrics.HookDone
		switch {
		case err != nil:
			result = metrics.HookError
		case !res.Done:
			result = metrics.HookWait
		}
		ps.c.metrics.ObserveHook(exec.Name(), string(req.Hook), result, time.Since(start))
		klog.FromContext(ctx).V(4).Info("Hook called", "hook", req.Hook, "attempt", req.Attempt,
			"result", result, "duration", time.Since(start), "err", err)
	}()
	return executor.RunHook(ctx, exec, req)
}

// paramTypes are the types exec declares for its parameters, by name.
func paramTypes(exec executor.TaskExecutor) map[string]contract.ParamType {
	params := executor.Describe(exec).Parameters
	types := make(map[string]contract.ParamType, len(params))
	for _, p := range params {
		types[p.Name] = p.Type
	}
	return types
}
