// Package pluginauthor is what kubectl-stepwise offers the authors of executor plugins,
// with no cluster: `plugin init` writes a new plugin to start from, `plugin run` starts a
// plugin binary as the operator does and runs one hook of one of its executors. It is apart
// from the commands that look at and steer pipelines (pkg/cli, which adds NewCommand to its
// root), as it has another audience and no use for the cluster's clients.
package pluginauthor

import (
	"errors"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/stepwise-dev/stepwise/pkg/plugin/layout"
)

// pluginPrefix starts the name of every plugin executable the operator loads.
const pluginPrefix = layout.Prefix

// ErrHookFailed and ErrHookWaiting end `plugin run` once it printed the hook's answer:
// the hook failed (or the engine would refuse its parameters), or it asks to be called
// again later. kubectl-stepwise exits with a code of its own for each.
var (
	ErrHookFailed  = errors.New("the hook failed")
	ErrHookWaiting = errors.New("the hook is waiting")
)

// NewCommand returns `plugin` and its subcommands, which write to streams.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Write executor plugins and run their hooks locally",
		Long: `Write and try executor plugins (` + pluginPrefix + `* executables built with pkg/sdk) without a
cluster: plugin init writes a new plugin to start from, plugin run starts a plugin binary as
the operator does and runs one hook of one of its executors; plugin keygen, sign and verify
sign a plugin binary as the operator checks it before it runs an installed plugin; plugin
search and install read a signed plugin index and write the chart's values of a plugin by
its name, and plugin index sign signs an index.`,
		Example: `  kubectl stepwise plugin init acme
  go build -o ` + pluginDir + `/` + pluginPrefix + `acme ./plugins/acme
  kubectl stepwise plugin run ` + pluginDir + `/` + pluginPrefix + `acme acme.hello Create -p name=Ada`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newRunCommand(streams), newInitCommand(streams),
		newKeygenCommand(streams), newSignCommand(streams), newVerifyCommand(streams), newImageCommand(streams),
		newSearchCommand(streams), newInstallCommand(streams), newIndexCommand(streams))
	return cmd
}
