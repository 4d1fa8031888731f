package cli

import (
	"encoding/json"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/stepwise-dev/stepwise/pkg/catalog"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
)

// commandsOf is cmd and every command under it.
func commandsOf(cmd *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{cmd}
	for _, c := range cmd.Commands() {
		out = append(out, commandsOf(c)...)
	}
	return out
}

// TestOperatorNamespaceFlag: every command that reads the operator's namespace has the one
// --operator-namespace, with the default executors documents: $STEPWISE_NAMESPACE, else
// stepwise-system. The dashboard's own flag ignored $STEPWISE_NAMESPACE, so that with it
// set, executors and the dashboard's executors page read different namespaces.
func TestOperatorNamespaceFlag(t *testing.T) {
	tests := []struct {
		name string
		env  string
		want string
	}{
		{name: "unset: the operator's default namespace", want: catalog.DefaultNamespace},
		{name: "$STEPWISE_NAMESPACE", env: "ops", want: "ops"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(operatorNamespaceEnv, tt.env)
			root := NewCommand(genericiooptions.NewTestIOStreamsDiscard(), nil)
			var readers []string
			for _, cmd := range commandsOf(root) {
				f := cmd.Flags().Lookup("operator-namespace")
				if f == nil {
					continue
				}
				readers = append(readers, cmd.Name())
				assert.Equal(t, tt.want, f.DefValue, "the default of %s", cmd.CommandPath())
				assert.Equal(t, "Namespace the operator runs in (its --namespace); $STEPWISE_NAMESPACE sets the default.", f.Usage,
					"the help of %s", cmd.CommandPath())
			}
			assert.ElementsMatch(t, []string{"executors", "dashboard"}, readers)
		})
	}
}

func TestExecutorsReadTheNamespaceOfTheEnvironment(t *testing.T) {
	data, err := json.Marshal(catalog.Catalog{OperatorVersion: "v1.0.0", Executors: []catalog.Entry{{Name: "node.drain"}}})
	require.NoError(t, err)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: catalog.DefaultName, Namespace: "ops"},
		Data:       map[string]string{catalog.DataKey: string(data)},
	}
	c := &Clients{Stepwise: fake.NewClientset(), Kube: kubefake.NewClientset(cm)}

	t.Setenv(operatorNamespaceEnv, "ops")
	code, out, errOut := run(t, c, "executors")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "node.drain")

	code, _, errOut = run(t, c, "executors", "--operator-namespace", "elsewhere")
	assert.Equal(t, ExitError, code, "the flag wins")
	assert.Contains(t, errOut, "is the operator running in namespace elsewhere?")
}
