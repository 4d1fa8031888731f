package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/catalog"
	"github.com/stepwise-dev/stepwise/pkg/cli"
	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

// stepwiseCLI runs kubectl-stepwise in-process against a cluster's admin kubeconfig and
// returns its exit code, stdout and stderr.
func stepwiseCLI(t *testing.T, kubeconfig string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	code := cli.Execute(t.Context(), append(args, "--kubeconfig", kubeconfig), streams, nil)
	return code, out.String(), errOut.String()
}

// stepRows returns the rows of the step table of `status`, as fields, by step name.
func stepRows(t *testing.T, out string) map[string][]string {
	t.Helper()
	_, table, ok := strings.Cut(out, "\n\n")
	require.True(t, ok, "status prints a summary, a blank line and a table:\n%s", out)
	lines := strings.Split(strings.TrimSpace(table), "\n")
	require.Equal(t, []string{"STEP", "EXECUTOR", "PHASE", "HOOK", "ATTEMPTS", "DURATION", "MESSAGE"}, strings.Fields(lines[0]))
	rows := map[string][]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		rows[f[0]] = f
	}
	return rows
}

func grantConfigMaps(t *testing.T, ns, sa string) {
	t.Helper()
	cluster.Grant(t, ns, sa, sa, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update"}})
}

func TestCLIStatusSuspendResumeWatch(t *testing.T) {
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	p := recordPipeline(ns, "cli", "runner",
		recordStep("first", map[string]string{"output": "one"}),
		recordStep("gated", map[string]string{"gate": "true"}),
		recordStep("last", nil),
	)
	_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPipeline(t, ns, "cli", time.Minute, func(p *v1alpha1.Pipeline) bool {
		return len(p.Status.Steps) == 3 && p.Status.Steps[1].Phase == v1alpha1.StepRunning
	})

	code, out, errOut := stepwiseCLI(t, cluster.Kubeconfig, "status", "cli", "-n", ns)
	require.Equal(t, cli.ExitOK, code, errOut)
	assert.Contains(t, out, "Pipeline:   "+ns+"/cli\n")
	assert.Contains(t, out, "Phase:      Running (1/3 steps succeeded), step gated\n")
	assert.Contains(t, out, "Reason:     StepRunning\n")
	rows := stepRows(t, out)
	assert.Equal(t, []string{"first", "test.record", "Succeeded", "PostCreate", "1"}, rows["first"][:5])
	assert.Equal(t, []string{"gated", "test.record", "Running", "Create"}, rows["gated"][:4])
	assert.Equal(t, []string{"last", "test.record", "Pending", "-", "0", "-"}, rows["last"])

	// Suspend while the gated Create waits: once the gate opens that hook finishes, and
	// nothing new starts.
	code, out, errOut = stepwiseCLI(t, cluster.Kubeconfig, "suspend", "cli", "-n", ns)
	require.Equal(t, cli.ExitOK, code, errOut)
	assert.Equal(t, "pipeline.stepwise.dev/cli suspended\n", out)
	openGate(t, ns, "stepwise-record-cli", "gated")
	waitPipeline(t, ns, "cli", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSuspended })
	code, out, errOut = stepwiseCLI(t, cluster.Kubeconfig, "status", "cli", "-n", ns)
	require.Equal(t, cli.ExitOK, code, errOut)
	assert.Contains(t, out, "Reason:     Suspended\n")
	assert.Contains(t, out, "Note:       suspended (spec.suspend: true)\n")
	assert.Equal(t, "Pending", stepRows(t, out)["last"][2], "nothing new started")

	// Resume, and watch it to the end: plain lines, since stdout is not a terminal.
	code, out, errOut = stepwiseCLI(t, cluster.Kubeconfig, "resume", "cli", "-n", ns)
	require.Equal(t, cli.ExitOK, code, errOut)
	assert.Equal(t, "pipeline.stepwise.dev/cli resumed\n", out)
	code, out, errOut = stepwiseCLI(t, cluster.Kubeconfig, "watch", "cli", "-n", ns, "--timeout", "90s")
	require.Equal(t, cli.ExitOK, code, "stdout:\n%s\nstderr:\n%s\noperator log: %s", out, errOut, operator.Log)
	assert.NotContains(t, out, "\x1b[", "no terminal codes when stdout is not a terminal")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	assert.Contains(t, lines[len(lines)-1], "pipeline "+ns+"/cli Succeeded 3/3 Ready=True Succeeded: all 3 steps succeeded")

	code, out, errOut = stepwiseCLI(t, cluster.Kubeconfig, "status", "cli", "-n", ns, "-o", "json")
	require.Equal(t, cli.ExitOK, code, errOut)
	var got v1alpha1.Pipeline
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	assert.Equal(t, "Pipeline", got.Kind)
	assert.Equal(t, v1alpha1.PipelineSucceeded, got.Status.Phase)
	assert.Equal(t, "one", got.Status.Steps[0].Outputs["value"])
	assert.Empty(t, got.ManagedFields, "as kubectl get -o json")
}

// openGate lets test.record's gated Create of step finish.
func openGate(t *testing.T, ns, configMap, step string) {
	t.Helper()
	patch := []byte(`{"data":{"open.` + step + `":"true"}}`)
	_, err := cluster.Client.CoreV1().ConfigMaps(ns).Patch(t.Context(), configMap, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}

func TestCLIFailedPipelineExitCodeAndRetry(t *testing.T) {
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", false) // no RBAC yet: the first step is Forbidden
	first := recordStep("first", nil)
	first.Retry = &v1alpha1.RetryPolicy{Limit: 0}
	_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(ctx,
		recordPipeline(ns, "fixme", "runner", first, recordStep("second", nil)), metav1.CreateOptions{})
	require.NoError(t, err)

	// watch ends as soon as the pipeline fails, with exit code 2.
	code, out, errOut := stepwiseCLI(t, cluster.Kubeconfig, "watch", "fixme", "-n", ns, "--timeout", "90s")
	require.Equal(t, cli.ExitPipelineFailed, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Contains(t, out, "step first Failed PreCreate attempt 1: ")
	assert.Contains(t, out, `cannot get resource "configmaps"`, "plain lines carry whole messages")

	code, out, errOut = stepwiseCLI(t, cluster.Kubeconfig, "status", "fixme", "-n", ns)
	require.Equal(t, cli.ExitPipelineFailed, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Empty(t, errOut, "a failed pipeline is not an error of the command")
	assert.Contains(t, out, "Reason:     StepFailed\n")
	rows := stepRows(t, out)
	assert.Equal(t, []string{"first", "test.record", "Failed", "PreCreate", "1"}, rows["first"][:5])
	assert.True(t, strings.HasSuffix(strings.Join(rows["first"], " "), "…"), "a long message is cut in the table: %q", rows["first"])
	assert.Equal(t, "Pending", rows["second"][2])

	code, out, errOut = stepwiseCLI(t, cluster.Kubeconfig, "status", "fixme", "-n", ns, "-o", "yaml")
	require.Equal(t, cli.ExitPipelineFailed, code, errOut)
	var failed v1alpha1.Pipeline
	require.NoError(t, yaml.Unmarshal([]byte(out), &failed), out)
	assert.Contains(t, failed.Status.Steps[0].Message, `cannot get resource "configmaps"`, "-o yaml shows it whole")

	code, _, errOut = stepwiseCLI(t, cluster.Kubeconfig, "retry", "fixme", "-n", ns, "--step", "nope")
	assert.Equal(t, cli.ExitError, code)
	assert.Contains(t, errOut, `has no step "nope"`)

	// Fix the cause, retry, and the pipeline goes on from the failed step.
	grantConfigMaps(t, ns, "runner")
	code, out, errOut = stepwiseCLI(t, cluster.Kubeconfig, "retry", "fixme", "-n", ns)
	require.Equal(t, cli.ExitOK, code, errOut)
	assert.Equal(t, "pipeline.stepwise.dev/fixme retry requested from its failed step first\n", out)
	// watch does not take the Failed phase the retry is about to change for an answer.
	code, out, errOut = stepwiseCLI(t, cluster.Kubeconfig, "watch", "fixme", "-n", ns, "--timeout", "90s")
	require.Equal(t, cli.ExitOK, code, "stdout:\n%s\nstderr:\n%s\noperator log: %s", out, errOut, operator.Log)

	got := waitPipeline(t, ns, "fixme", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })
	assert.NotContains(t, got.Annotations, "stepwise.dev/retry", "the operator removed the annotation")
	// The failed PreCreate wrote nothing; the retry ran the failed step, then the next,
	// each hook once: the engine never works from a cache older than its own writes.
	assert.Equal(t, []string{
		"first/PreCreate", "first/Create", "first/PostCreate",
		"second/PreCreate", "second/Create", "second/PostCreate",
	}, recordedCalls(t, ns, "stepwise-record-fixme"))

	code, _, errOut = stepwiseCLI(t, cluster.Kubeconfig, "retry", "fixme", "-n", ns)
	assert.Equal(t, cli.ExitError, code, "nothing to retry")
	assert.Contains(t, errOut, "has not failed")
}

func TestCLIExecutors(t *testing.T) {
	// The operator publishes its catalogue in the background right after it starts.
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := catalog.Read(ctx, cluster.Client, framework.OperatorNamespace, catalog.DefaultName)
		return err == nil, nil
	})
	require.NoError(t, err, "no catalogue; operator log: %s", operator.Log)

	code, out, errOut := stepwiseCLI(t, cluster.Kubeconfig, "executors", "--operator-namespace", framework.OperatorNamespace)
	require.Equal(t, cli.ExitOK, code, errOut)
	rows := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Fields(l)
		rows[f[0]] = f
	}
	for _, builtin := range []string{"node.cordon", "node.drain", "node.delete", "k8s.apply", "k8s.wait", "k8s.scale", "test.noop", "test.record"} {
		require.Contains(t, rows, builtin, out)
		assert.Equal(t, "built-in", rows[builtin][2], builtin)
	}
	require.Contains(t, rows, "example.greet", "plugins are listed too:\n%s", out)
	assert.Equal(t, []string{"example.greet", "v0.1.0", "stepwise-plugin-example", "name*,salutation=Hello"}, rows["example.greet"][:4],
		"the plugin's declarations, defaults included, crossed the protocol")
	assert.Equal(t, "node*,timeout=10m,policy=Fail,replacement=Surge,handoffTimeout=5m,podSelector,rules,gracePeriodSeco…", rows["node.drain"][3])

	code, out, errOut = stepwiseCLI(t, cluster.Kubeconfig, "executors", "k8s.wait", "--operator-namespace", framework.OperatorNamespace)
	require.Equal(t, cli.ExitOK, code, errOut)
	assert.Contains(t, out, "Executor:      k8s.wait\n")
	assert.Contains(t, out, "  apiVersion   string     yes        -         -        API version of the object, e.g. apps/v1.\n")
	assert.Contains(t, out, "  timeout      duration   no         5m        -        How long to wait")
}

// TestKubectlFindsThePlugin runs the built binary as kubectl does with a plugin on the
// PATH: `kubectl stepwise`.
func TestKubectlFindsThePlugin(t *testing.T) {
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(ctx,
		recordPipeline(ns, "plugin", "runner", recordStep("only", nil)), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPipeline(t, ns, "plugin", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })

	cmd := exec.CommandContext(ctx, cluster.BinPath("kubectl"), "stepwise", "status", "plugin", "-n", ns, "--kubeconfig", cluster.Kubeconfig)
	cmd.Env = append(os.Environ(), "PATH="+cluster.BinPath("")+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "bin/kubectl-stepwise is built by make build:\n%s", out)
	assert.Contains(t, string(out), "Phase:      Succeeded (1/1 steps succeeded)")

	// kubectl passes the exit code through.
	cmd = exec.CommandContext(ctx, cluster.BinPath("kubectl"), "stepwise", "status", "nope", "-n", ns, "--kubeconfig", cluster.Kubeconfig)
	cmd.Env = append(os.Environ(), "PATH="+cluster.BinPath("")+":"+os.Getenv("PATH"))
	out, err = cmd.CombinedOutput()
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr, "%s", out)
	assert.Equal(t, cli.ExitError, exitErr.ExitCode())
	assert.Contains(t, string(out), `pipelines.stepwise.dev "nope" not found`)
}
