package host

import (
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
)

var _ executor.Describer = (*pluginExecutor)(nil)

// Describe is what the plugin said about the executor when it was started, in the
// engine's terms, naming the plugin executable that serves it.
func (e *pluginExecutor) Describe() contract.Description {
	d := proto.DecodeDescription(e.info)
	if e.proc != nil {
		d.Plugin = e.proc.name
	}
	return d
}
