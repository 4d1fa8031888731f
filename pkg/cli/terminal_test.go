package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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
	"github.com/stepwise-dev/stepwise/pkg/contract"
)

func TestOneLine(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		limit int
		want  string
	}{
		{"whitespace runs become one space", " a\n b\tc ", 0, "a b c"},
		{"truncated", "abcdefgh", 5, "abcd…"},
		{"counts runes, not bytes", "äöü", 3, "äöü"},
		{"OSC: set the window title, ended by BEL", "\x1b]0;pwned\x07done", 0, `\x1b]0;pwned\x07done`},
		{"CSI: clear the screen, colours", "\x1b[2J\x1b[31mred\x1b[0m", 0, `\x1b[2J\x1b[31mred\x1b[0m`},
		{"carriage return cannot overwrite the line", "Succeeded\rFailed   ", 0, "Succeeded Failed"},
		{"backspace, NUL, DEL", "ok\b\b\x00\x7f", 0, `ok\x08\x08\x00\x7f`},
		{"C1 CSI as a character", "\u009b2Jcleared", 0, `\u009b2Jcleared`},
		{"C1 next line is white space", "a\u0085b", 0, "a b"},
		{"invalid UTF-8: a lone C1 byte and others", "a\x9b2J\xff\xc3", 0, `a\x9b2J\xff\xc3`},
		{"the replacement character itself stays", "a\uFFFDb", 0, "a\uFFFDb"},
		{"truncation counts what is shown", "\x1b\x1b\x1b", 6, `\x1b\…`},
		{"printable text is left alone", `C:\dir "quoted" 100% ✓`, 0, `C:\dir "quoted" 100% ✓`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := oneLine(tt.in, tt.limit)
			assert.Equal(t, tt.want, got)
			assertTerminalSafe(t, got)
			assert.Equal(t, got, oneLine(got, tt.limit), "idempotent")
		})
	}
}

func TestEscapeLine(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"tabs kept: a stack trace's indentation", "\tmain.go:12 +0x1d", "\tmain.go:12 +0x1d"},
		{"spaces kept", "a  b", "a  b"},
		{"newline and carriage return escaped", "a\r\nb", `a\x0d\x0ab`},
		{"ESC, C1 and bytes that are not UTF-8", "\x1b[2J\u009b\xff✓", `\x1b[2J\u009b\xff✓`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, escapeLine(tt.in))
		})
	}
}

// assertTerminalSafe fails when out holds anything a terminal acts on rather than shows:
// a control character other than a newline, or bytes that are not UTF-8.
func assertTerminalSafe(t *testing.T, out string) {
	t.Helper()
	var bad []string
	for i, r := range out {
		if _, size := utf8.DecodeRuneInString(out[i:]); r == utf8.RuneError && size == 1 {
			bad = append(bad, fmt.Sprintf("byte %#x at %d", out[i], i))
			continue
		}
		if r != '\n' && (r < 0x20 || (r >= 0x7f && r <= 0x9f)) {
			bad = append(bad, fmt.Sprintf("%U at %d", r, i))
		}
	}
	assert.Empty(t, bad, "what a terminal would act on, in:\n%q", out)
}

// hostile is text a tenant can get into a status (a message an object's condition
// carries, which k8s.wait quotes) or a plugin into the catalogue.
const hostile = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\rFAKE\u009b31m\x7f\xff\tend"

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
			assertTerminalSafe(t, out)
			if tt.check != nil {
				tt.check(t, out)
			}
		})
	}
}
