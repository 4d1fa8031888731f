package executor

import (
	"context"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// Planner is implemented by an executor that can tell what its creation hooks would do.
type Planner = contract.Planner[*Request]

// Plan asks e what its creation hooks would do for req, without doing it; an executor that
// cannot plan answers contract.NoPlan.
func Plan(ctx context.Context, e TaskExecutor, req *Request) (contract.Plan, error) {
	p, ok := e.(Planner)
	if !ok {
		return contract.NoPlan(), nil
	}
	return p.Plan(ctx, req)
}
