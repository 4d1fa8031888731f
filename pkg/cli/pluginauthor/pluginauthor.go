package cli

import (
	"github.com/spf13/cobra"
)

// pluginPrefix starts the name of every plugin executable the operator loads.
const pluginPrefix = "stepwise-plugin-"

func newPluginCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Write executor plugins and run their hooks locally",
		Long: `Write and try executor plugins (` + pluginPrefix + `* executables built with pkg/sdk) without a
cluster: plugin init writes a new plugin to start from, plugin run starts a plugin binary as
the operator does and runs one hook of one of its executors.`,
		Example: `  kubectl stepwise plugin init acme
  go build -o bin/` + pluginPrefix + `acme ./plugins/acme
  kubectl stepwise plugin run bin/` + pluginPrefix + `acme acme.hello Create -p name=Ada`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newPluginRunCommand(o), newPluginInitCommand(o))
	return cmd
}
