package cli

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clienttesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/internal/version"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// complete runs kubectl-stepwise __complete ARGS, as the shell scripts and
// kubectl_complete-stepwise do, and returns the candidates and the directive it printed.
func complete(t *testing.T, clients func() (*Clients, error), args ...string) ([]string, cobra.ShellCompDirective) {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	code := Execute(context.Background(), append([]string{cobra.ShellCompRequestCmd}, args...), streams, clients)
	require.Equal(t, ExitOK, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	require.True(t, strings.HasPrefix(last, ":"), "the directive ends the output:\n%s", out.String())
	directive, err := strconv.Atoi(last[1:])
	require.NoError(t, err)
	var candidates []string
	for _, l := range lines[:len(lines)-1] {
		// A candidate's description follows a tab; names have none.
		name, _, _ := strings.Cut(l, "\t")
		candidates = append(candidates, name)
	}
	return candidates, cobra.ShellCompDirective(directive)
}

// execute runs kubectl-stepwise with args as they are (run adds --namespace).
func execute(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	c, _ := fakeClients()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	code := Execute(context.Background(), args, streams, func() (*Clients, error) { return c, nil })
	return code, out.String(), errOut.String()
}

func completionObjects() []runtime.Object {
	objs := []runtime.Object{
		&v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "demo"}},
		&v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "retire-node-3", Namespace: "demo"}},
		&v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: "other"}},
		&v1alpha1.PipelineTrigger{ObjectMeta: metav1.ObjectMeta{Name: "retire-labelled", Namespace: "demo"}},
		&v1alpha1.PipelineTrigger{ObjectMeta: metav1.ObjectMeta{Name: "rotate", Namespace: "demo"}},
		&v1alpha1.PipelineTrigger{ObjectMeta: metav1.ObjectMeta{Name: "other-trigger", Namespace: "other"}},
		&v1alpha1.PipelineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "retire-node", Namespace: "demo"}},
		&v1alpha1.PipelineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "other-template", Namespace: "other"}},
	}
	return objs
}

func TestCompleteNames(t *testing.T) {
	pipelines := []string{"hello", "retire-node-3"}
	triggers := []string{"retire-labelled", "rotate"}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "status", args: []string{"-n", "demo", "status", ""}, want: pipelines},
		{name: "--namespace=", args: []string{"status", "--namespace=demo", ""}, want: pipelines},
		{name: "typed: the names that start with it", args: []string{"-n", "demo", "status", "re"}, want: []string{"retire-node-3"}},
		{name: "nothing starts so", args: []string{"-n", "demo", "status", "x"}},
		{name: "another namespace", args: []string{"-n", "other", "status", ""}, want: []string{"elsewhere"}},
		{name: "after the name, nothing", args: []string{"-n", "demo", "status", "hello", ""}},
		{name: "watch", args: []string{"-n", "demo", "watch", ""}, want: pipelines},
		{name: "retry", args: []string{"-n", "demo", "retry", ""}, want: pipelines},
		{name: "rerun", args: []string{"-n", "demo", "rerun", ""}, want: pipelines},
		{name: "suspend", args: []string{"-n", "demo", "suspend", ""}, want: pipelines},
		{name: "resume", args: []string{"-n", "demo", "resume", ""}, want: pipelines},
		{name: "approve", args: []string{"-n", "demo", "approve", ""}, want: pipelines},
		{name: "reject", args: []string{"-n", "demo", "reject", ""}, want: pipelines},
		// With its subcommands.
		{name: "triggers", args: []string{"-n", "demo", "triggers", ""}, want: append([]string{"pause", "resume"}, triggers...)},
		{name: "triggers, typed", args: []string{"-n", "demo", "triggers", "re"}, want: []string{"resume", "retire-labelled"}},
		{name: "triggers pause", args: []string{"-n", "demo", "triggers", "pause", ""}, want: triggers},
		{name: "triggers resume", args: []string{"-n", "demo", "triggers", "resume", "rot"}, want: []string{"rotate"}},
		{name: "approve --trigger", args: []string{"-n", "demo", "approve", "--trigger", ""}, want: triggers},
		{name: "reject --trigger", args: []string{"-n", "demo", "reject", "--all-waiting", "--trigger", ""}, want: triggers},
		{name: "plan --trigger", args: []string{"-n", "demo", "plan", "--trigger", ""}, want: triggers},
		{name: "plan --template", args: []string{"-n", "demo", "plan", "--template", ""}, want: []string{"retire-node"}},
		{name: "run", args: []string{"-n", "demo", "run", ""}, want: []string{"retire-node"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := fakeClients(completionObjects()...)
			got, directive := complete(t, func() (*Clients, error) { return c, nil }, tt.args...)
			assert.ElementsMatch(t, tt.want, got)
			assert.Equal(t, cobra.ShellCompDirectiveNoFileComp, directive, "names, never files")
		})
	}
}

// TestCompleteNamesErrors: what goes wrong completes no name (nor file names), with no
// panic and no message on stdout, which the shell would take for candidates.
func TestCompleteNamesErrors(t *testing.T) {
	t.Run("the API server refuses", func(t *testing.T) {
		c, sw := fakeClients(completionObjects()...)
		sw.PrependReactor("list", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("pipelines.stepwise.dev is forbidden")
		})
		for _, tt := range []struct {
			args []string
			want []string
		}{
			{args: []string{"-n", "demo", "status", ""}},
			{args: []string{"-n", "demo", "run", ""}},
			{args: []string{"-n", "demo", "approve", "--trigger", ""}},
			// Its subcommands still.
			{args: []string{"-n", "demo", "triggers", ""}, want: []string{"pause", "resume"}},
		} {
			got, directive := complete(t, func() (*Clients, error) { return c, nil }, tt.args...)
			assert.Equal(t, tt.want, got, "%v", tt.args)
			assert.Equal(t, cobra.ShellCompDirectiveNoFileComp, directive, "%v", tt.args)
		}
	})
	t.Run("no clients", func(t *testing.T) {
		got, directive := complete(t, func() (*Clients, error) { return nil, errors.New("load kubeconfig: no configuration") },
			"-n", "demo", "status", "")
		assert.Empty(t, got)
		assert.Equal(t, cobra.ShellCompDirectiveNoFileComp, directive, "no file names either")
	})
	t.Run("a name no shell should read", func(t *testing.T) {
		c, _ := fakeClients(
			&v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "ok", Namespace: "demo"}},
			&v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "two\nlines", Namespace: "demo"}},
			&v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "a\ttab", Namespace: "demo"}},
			&v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "esc\x1b[2J", Namespace: "demo"}},
		)
		got, _ := complete(t, func() (*Clients, error) { return c, nil }, "-n", "demo", "status", "")
		assert.Equal(t, []string{"ok"}, got)
	})
}

func TestCompletionCommand(t *testing.T) {
	tests := []struct {
		shell string
		want  string
	}{
		{shell: "bash", want: "# bash completion V2 for kubectl-stepwise"},
		{shell: "zsh", want: "#compdef kubectl-stepwise"},
		{shell: "fish", want: "complete -c kubectl-stepwise"},
		{shell: "powershell", want: "Register-ArgumentCompleter"},
	}
	for _, tt := range tests {
		t.Run(tt.shell, func(t *testing.T) {
			code, out, errOut := execute(t, "completion", tt.shell)
			require.Equal(t, ExitOK, code, errOut)
			assert.Contains(t, out, tt.want)
			assert.Contains(t, out, cobra.ShellCompRequestCmd, "the script asks kubectl-stepwise for candidates")
		})
	}

	code, out, errOut := execute(t, "completion", "--help")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "kubectl_complete-stepwise")
	assert.Contains(t, out, `kubectl-stepwise __complete "$@"`)

	code, out, errOut = execute(t, "--help")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "\n  completion ", "listed among the commands")
}

func TestVersionFlag(t *testing.T) {
	code, out, errOut := execute(t, "--version")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, "kubectl stepwise version "+version.Version+"\n", out)

	// -v is kubectl's log verbosity, not --version.
	code, out, errOut = execute(t, "-v")
	assert.Equal(t, ExitError, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "unknown shorthand flag: 'v'")

	// Only the root has it.
	code, _, errOut = execute(t, "status", "hello", "--version")
	assert.Equal(t, ExitError, code)
	assert.Contains(t, errOut, "unknown flag: --version")
}
