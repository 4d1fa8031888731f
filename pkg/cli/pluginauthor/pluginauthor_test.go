package pluginauthor_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/stepwise-dev/stepwise/pkg/cli"
)

// runPlugin runs kubectl-stepwise plugin ARGS, as a user does: its exit code and what it
// printed are kubectl-stepwise's. The plugin commands need no cluster.
func runPlugin(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	noCluster := func() (*cli.Clients, error) {
		t.Error("a plugin command asked for the cluster's clients")
		return nil, errors.New("no cluster in these tests")
	}
	code := cli.Execute(t.Context(), append([]string{"plugin"}, args...), streams, noCluster)
	return code, out.String(), errOut.String()
}
