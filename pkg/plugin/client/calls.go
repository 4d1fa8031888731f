package client

import (
	"context"
	"errors"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
)

// Executor is one executor a plugin serves, as it describes itself.
type Executor struct {
	Name        string
	Description contract.Description
}

// Describe asks the plugin which executors it serves. A failed call is a *CallError.
func (c *Client) Describe(ctx context.Context) ([]Executor, error) {
	resp, err := c.rpc.Describe(ctx, &proto.DescribeRequest{})
	if err != nil {
		return nil, callError(ctx, c.site(""), err, c.gone)
	}
	out := make([]Executor, 0, len(resp.GetExecutors()))
	for _, info := range resp.GetExecutors() {
		out = append(out, Executor{Name: info.GetName(), Description: proto.DecodeDescription(info)})
	}
	return out, nil
}

// Run runs the hook req names of the named executor; the context carries the call's
// deadline to the plugin. The hook's own error comes back as the plugin returned it, with
// its reason and permanence; any other failure is a *CallError (StageOf).
func (c *Client) Run(ctx context.Context, executor string, req *contract.Request) (contract.Result, error) {
	in, err := proto.EncodeRequest(executor, req)
	if err != nil {
		return contract.Result{}, &CallError{Stage: NotSent, Err: err}
	}
	resp, err := c.rpc.RunHook(ctx, in)
	if err != nil {
		return contract.Result{}, callError(ctx, c.site(executor), err, c.gone)
	}
	res, err := proto.DecodeOutcome(resp)
	if errors.Is(err, proto.ErrNoOutcome) {
		return contract.Result{}, noOutcome(c.name, err)
	}
	return res, err
}

// Plan asks the plugin what the executor's creation hooks would do, its errors as Run's.
// A plugin of a protocol before version 3 cannot say: it would run, with no details.
func (c *Client) Plan(ctx context.Context, executor string, req *contract.Request) (contract.Plan, error) {
	in, err := proto.EncodeRequest(executor, req)
	if err != nil {
		return contract.Plan{}, &CallError{Stage: NotSent, Err: err}
	}
	if c.version < proto.Version3 {
		return contract.NoPlan(), nil
	}
	resp, err := c.rpc.Plan(ctx, in)
	if err != nil {
		return contract.Plan{}, callError(ctx, c.site(executor), err, c.gone)
	}
	p, err := proto.DecodePlanOutcome(resp)
	if errors.Is(err, proto.ErrNoOutcome) {
		return contract.Plan{}, noOutcome(c.name, err)
	}
	return p, err
}

// site names a call of executor in its errors; "" for Describe.
func (c *Client) site(executor string) callSite {
	return callSite{plugin: c.name, executor: executor, restarts: c.restarts}
}
