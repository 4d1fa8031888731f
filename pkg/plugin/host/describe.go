package host

import (
	"slices"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

var _ executor.Describer = (*pluginExecutor)(nil)

// Describe is what the plugin said about the executor when it was started, in the
// engine's terms, naming the plugin executable that serves it. Each caller gets a list of
// parameters of its own.
func (e *pluginExecutor) Describe() contract.Description {
	d := e.described.Description
	d.Parameters = slices.Clone(d.Parameters)
	if e.proc != nil {
		d.Plugin = e.proc.name
	}
	return d
}
