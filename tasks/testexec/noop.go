package testexec

import (
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// Noop is test.noop.
type Noop struct{ executor.Base }

func (Noop) Name() string { return "test.noop" }

// Describe documents test.noop for the executor catalogue. It declares no parameter, so
// the engine lets it take any.
func (Noop) Describe() contract.Description {
	return contract.Description{Description: "Does nothing, at once, in every hook (tests and demos)."}
}
