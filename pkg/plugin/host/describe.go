package host

import "github.com/stepwise-dev/stepwise/pkg/executor"

var _ executor.Describer = (*pluginExecutor)(nil)

// Describe is what the plugin said about the executor when it was started, in the
// engine's terms, naming the plugin executable that serves it.
func (e *pluginExecutor) Describe() executor.Description {
	d := executor.Description{
		Version:     e.info.GetVersion(),
		Description: e.info.GetDescription(),
	}
	if e.proc != nil {
		d.Plugin = e.proc.name
	}
	for _, p := range e.info.GetParameters() {
		d.Parameters = append(d.Parameters, executor.Parameter{
			Name:        p.GetName(),
			Description: p.GetDescription(),
			Required:    p.GetRequired(),
		})
	}
	return d
}
