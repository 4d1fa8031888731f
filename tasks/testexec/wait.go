package testexec

import (
	"context"
	"fmt"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// Wait is test.wait: its Create is done once duration has passed since its first call,
// and until then asks to be called again, freeing its worker, as a hook polling a slow
// remote operation (a VM being deleted) does; benchmarks use it for steps that take time
// without holding the engine's workers.
type Wait struct{ executor.Base }

func (Wait) Name() string { return "test.wait" }

func (Wait) Create(_ context.Context, req *executor.Request) (contract.Result, error) {
	d := req.Duration("duration")
	if left := time.Until(req.HookStarted.Add(d)); left > 0 {
		return contract.Wait(left, fmt.Sprintf("%s left", left.Round(time.Millisecond))), nil
	}
	return contract.Done("waited " + d.String()), nil
}

// Describe documents test.wait for the executor catalogue.
func (Wait) Describe() contract.Description {
	return contract.Description{
		Description: "Create is done once duration has passed since its first call, asking to be called again until then (its worker free); the other hooks do nothing (tests and benchmarks).",
		Parameters: []contract.Parameter{
			{Name: "duration", Type: contract.ParamDuration, Default: "2s", Description: "How long after its first call Create is done."},
		},
	}
}

var _ executor.TaskExecutor = Wait{}
