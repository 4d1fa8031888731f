package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/catalog"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
)

func TestExecutorsCommand(t *testing.T) {
	cat := catalog.Catalog{OperatorVersion: "v1.0.0", Executors: []catalog.Entry{
		{Name: "example.greet", Description: contract.Description{Version: "v0.1.0", Description: "Greets.", Plugin: "stepwise-plugin-example",
			Parameters: []contract.Parameter{{Name: "name", Description: "Who to greet.", Required: true}}}},
		{Name: "node.drain", Description: contract.Description{Version: "v1.0.0", Description: "Drains.",
			Parameters: []contract.Parameter{
				{Name: "node", Description: "The node.", Required: true, Type: contract.ParamString},
				{Name: "timeout", Description: "How long.", Type: contract.ParamDuration, Default: "10m"},
				{Name: "mode", Description: "How to evict.", Type: contract.ParamEnum, Values: []string{"evict", "delete"}, Default: "evict"},
				{Name: "force", Description: "Delete unmanaged pods.", Type: contract.ParamBool},
			}}},
		{Name: "test.noop", Description: contract.Description{Version: "v1.0.0"}},
	}, RefusedPlugins: []executor.Refusal{{Plugin: "stepwise-plugin-acme", Reason: v1alpha1.PluginSignedByAnother, Message: "not\nsigned by the policy's key"}}}
	data, err := json.Marshal(cat)
	require.NoError(t, err)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: catalog.DefaultName, Namespace: "ops"},
		Data:       map[string]string{catalog.DataKey: string(data)},
	}
	c := &Clients{Stepwise: fake.NewClientset(), Kube: kubefake.NewClientset(cm)}

	code, out, errOut := run(t, c, "executors", "--operator-namespace", "ops")
	require.Equal(t, ExitOK, code, errOut)
	var rows [][]string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		rows = append(rows, strings.Fields(line))
	}
	assert.Equal(t, [][]string{
		{"EXECUTOR", "VERSION", "SERVED", "BY", "PARAMETERS", "DESCRIPTION"},
		{"example.greet", "v0.1.0", "stepwise-plugin-example", "name*", "Greets."},
		{"node.drain", "v1.0.0", "built-in", "node*,timeout=10m,mode=evict,force", "Drains."},
		{"test.noop", "v1.0.0", "built-in", "-"},
		{},
		{"REFUSED", "PLUGIN", "REASON", "MESSAGE"},
		{"stepwise-plugin-acme", "SignedByAnother", "not", "signed", "by", "the", "policy's", "key"},
	}, rows, "the refused plugins after the executors, each on one line")

	code, out, errOut = run(t, c, "executors", "node.drain", "--operator-namespace", "ops")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, `Executor:      node.drain
Version:       v1.0.0
Served by:     built-in
Description:   Drains.
Parameters:
  NAME         TYPE       REQUIRED   DEFAULT   VALUES         DESCRIPTION
  node         string     yes        -         -              The node.
  timeout      duration   no         10m       -              How long.
  mode         enum       no         evict     evict,delete   How to evict.
  force        bool       no         -         -              Delete unmanaged pods.
`, out)

	code, out, errOut = run(t, c, "executors", "example.greet", "--operator-namespace", "ops")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "  name         -      yes        -         -        Who to greet.\n", "an untyped parameter")

	code, out, errOut = run(t, c, "executors", "-o", "json", "--operator-namespace", "ops")
	require.Equal(t, ExitOK, code, errOut)
	var got catalog.Catalog
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, cat, got)

	code, _, errOut = run(t, c, "executors", "nope", "--operator-namespace", "ops")
	assert.Equal(t, ExitError, code)
	assert.Contains(t, errOut, `the operator offers no executor "nope"`)

	code, _, errOut = run(t, c, "executors")
	assert.Equal(t, ExitError, code, "no catalogue in the default namespace")
	assert.Contains(t, errOut, "is the operator running in namespace stepwise-system?")
}
