package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/stepwise-dev/stepwise/pkg/catalog"
)

// operatorNamespaceEnv names the operator's namespace when --operator-namespace is not
// given: set once, it points every command at an operator installed elsewhere.
const operatorNamespaceEnv = "STEPWISE_NAMESPACE"

// addOperatorNamespaceFlag defines --operator-namespace on cmd, stored in ns, for the
// commands that read what the operator publishes in its own namespace (its executor
// catalogue). Every such command takes it from here, so that they read the same namespace:
// the flag, else $STEPWISE_NAMESPACE, else the operator's default namespace.
func addOperatorNamespaceFlag(cmd *cobra.Command, ns *string) {
	def := os.Getenv(operatorNamespaceEnv)
	if def == "" {
		def = catalog.DefaultNamespace
	}
	cmd.Flags().StringVar(ns, "operator-namespace", def,
		"Namespace the operator runs in (its --namespace); $"+operatorNamespaceEnv+" sets the default.")
}
