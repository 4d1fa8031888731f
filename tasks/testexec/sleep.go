package testexec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// Sleep is test.sleep: its Create takes a while, or hangs, as a hook calling a slow or
// silent endpoint does; benchmarks use it to be a tenant whose hooks hold workers.
type Sleep struct{ executor.Base }

func (Sleep) Name() string { return "test.sleep" }

func (Sleep) Create(ctx context.Context, req *executor.Request) (contract.Result, error) {
	d := req.Duration("duration")
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return contract.Result{}, fmt.Errorf("slept less than %s: %w", d, ctx.Err())
	}
	switch req.String("fail") {
	case FailPermanent:
		return contract.Result{}, contract.Permanent("TestFailure", errors.New("asked to fail permanently"))
	case FailRetryable:
		return contract.Result{}, errors.New("asked to fail")
	}
	return contract.Done("slept " + d.String()), nil
}

// Describe documents test.sleep for the executor catalogue.
func (Sleep) Describe() contract.Description {
	return contract.Description{
		Description: "Create sleeps for duration, then succeeds or fails as asked; the other hooks do nothing (tests and benchmarks).",
		Parameters: []contract.Parameter{
			{Name: "duration", Type: contract.ParamDuration, Default: "1s", Description: "How long Create takes; it returns sooner only when its call is cancelled (the engine's hook call bound)."},
			{Name: "fail", Type: contract.ParamEnum, Values: []string{FailPermanent, FailRetryable}, Description: "permanent or retryable: Create fails that way once it has slept."},
		},
	}
}

var _ executor.TaskExecutor = Sleep{}
