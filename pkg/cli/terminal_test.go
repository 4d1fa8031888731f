package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/catalog"
	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe/termsafetest"
	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// hostile is termsafetest.Hostile, which every test of this file uses.
const hostile = termsafetest.Hostile

// hostilePipeline has hostile text in every field of its status the CLI shows.
func hostilePipeline(p *v1alpha1.Pipeline) {
	p.Status.Phase = v1alpha1.PipelineFailed
	p.Status.CurrentStep = "build" + hostile
	p.Status.Progress = "1/3" + hostile
	p.Status.Conditions = ready(metav1.ConditionFalse, "StepFailed"+hostile, hostile, 9*time.Second)
	p.Status.Steps[0].Message = hostile
	p.Status.Steps[1].Name = "build" + hostile
	p.Status.Steps[1].Executor = "k8s.apply" + hostile
	p.Status.Steps[1].Phase = v1alpha1.StepFailed + hostile
	p.Status.Steps[1].Hook = v1alpha1.HookCreate + hostile
	p.Status.Steps[1].Message = hostile
	p.Status.Steps[1].Conditions = ready(metav1.ConditionFalse, "Forbidden"+hostile, hostile, 9*time.Second)
	p.Spec.Steps[1].Name = p.Status.Steps[1].Name
	p.Spec.Steps[2].Executor = "test.noop" + hostile
}

func TestClusterTextCannotDriveTheTerminal(t *testing.T) {
	hostileCatalog := catalog.Catalog{OperatorVersion: "v1" + hostile, Executors: []catalog.Entry{{
		Name: "evil.run\x1b[8m", // what follows is hidden
		Description: contract.Description{Version: "v0" + hostile, Description: hostile, Plugin: "stepwise-plugin-evil" + hostile,
			Parameters: []contract.Parameter{{Name: "x" + hostile, Description: hostile, Required: true},
				{Name: "y", Type: contract.ParamType(hostile), Default: hostile, Values: []string{hostile, "b"}}}},
	}}}
	data, err := json.Marshal(hostileCatalog)
	require.NoError(t, err)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: catalog.DefaultName, Namespace: "ops"},
		Data:       map[string]string{catalog.DataKey: string(data)},
	}
	p := pipeline(v1alpha1.StepFailed, hostilePipeline)
	commandOutput := func(args ...string) func(t *testing.T) string {
		return func(t *testing.T) string {
			c, _ := fakeClients(p)
			c.Kube = kubefake.NewClientset(cm)
			_, out, errOut := run(t, c, args...)
			assert.Empty(t, errOut)
			return out
		}
	}
	tests := []struct {
		name  string
		print func(t *testing.T) string
		// check, when set, looks at what was printed further.
		check func(t *testing.T, out string)
	}{
		{name: "status", print: commandOutput("status", "hello"), check: func(t *testing.T, out string) {
			assert.Contains(t, out, `\x1b]0;pwned\x07\x1b[2J\x1b[31mred FAKE\u009b31m\x7f\xff end`, "shown, visibly")
			assert.Len(t, tableRows(t, out), 4, "one row a step: no tab or newline breaks the table")
		}},
		{name: "status -o json", print: commandOutput("status", "hello", "-o", "json"), check: func(t *testing.T, out string) {
			var got v1alpha1.Pipeline
			require.NoError(t, json.Unmarshal([]byte(out), &got))
			require.Len(t, got.Status.Steps, 2)
			assert.Equal(t, strings.ToValidUTF8(hostile, "\uFFFD"), got.Status.Steps[1].Message, "the JSON says the same, escaped")
		}},
		{name: "status -o yaml", print: commandOutput("status", "hello", "-o", "yaml"), check: func(t *testing.T, out string) {
			var got v1alpha1.Pipeline
			require.NoError(t, yaml.Unmarshal([]byte(out), &got))
			require.Len(t, got.Status.Steps, 2)
			assert.Equal(t, strings.ToValidUTF8(hostile, "\uFFFD"), got.Status.Steps[1].Message, "the YAML says the same, escaped")
		}},
		{name: "watch, one line a change", print: func(t *testing.T) string {
			var buf bytes.Buffer
			(&lineRenderer{w: &buf}).render(p, t0)
			return buf.String()
		}},
		{name: "watch on a terminal", print: func(t *testing.T) string {
			var buf bytes.Buffer
			(&screenRenderer{w: &buf}).render(p, t0)
			out, ok := strings.CutPrefix(buf.String(), "\x1b[H\x1b[2J")
			require.True(t, ok, "the renderer's own clear screen comes first")
			return out
		}},
		{name: "retry", print: func(t *testing.T) string {
			c, _ := fakeClients(p)
			code, out, errOut := run(t, c, "retry", "hello")
			require.Equal(t, ExitOK, code, errOut)
			return out
		}},
		{name: "executors", print: commandOutput("executors", "--operator-namespace", "ops")},
		{name: "executors NAME", print: commandOutput("executors", "evil.run\x1b[8m", "--operator-namespace", "ops")},
		{name: "executors -o json", print: commandOutput("executors", "-o", "json", "--operator-namespace", "ops")},
		{name: "executors -o yaml", print: commandOutput("executors", "-o", "yaml", "--operator-namespace", "ops"), check: func(t *testing.T, out string) {
			var got catalog.Catalog
			require.NoError(t, yaml.Unmarshal([]byte(out), &got))
			require.Len(t, got.Executors, 1)
			assert.Equal(t, strings.ToValidUTF8(hostile, "\uFFFD"), got.Executors[0].Description.Description)
		}},
		{name: "errors the API server returns", print: func(t *testing.T) string {
			c, sw := fakeClients(p)
			sw.PrependReactor("get", "pipelines", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New("denied" + hostile)
			})
			code, out, errOut := run(t, c, "status", "hello")
			require.Equal(t, ExitError, code)
			assert.Empty(t, out)
			assert.Contains(t, errOut, "denied")
			return errOut
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := tt.print(t)
			termsafetest.AssertSafe(t, out)
			if tt.check != nil {
				tt.check(t, out)
			}
		})
	}
}
