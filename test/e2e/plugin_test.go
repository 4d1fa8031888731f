package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

// pluginArgs makes the operator load the plugins `make plugins` built into bin/plugins.
func pluginArgs() []string { return pluginArgsOn(cluster) }

// pluginArgsOn is pluginArgs on the control plane c.
func pluginArgsOn(c *framework.Cluster) []string {
	// The stand-ins for clouds, receivers and Prometheus listen on loopback, which plugins
	// and health gates may not reach unless allowed.
	return []string{"--plugin-dir", c.BinPath("plugins"), "--plugin-allowed-cidrs=127.0.0.0/8", "--gate-allowed-cidrs=127.0.0.0/8"}
}

// pluginPIDs lists the running processes of the example plugin that are children of the
// operator process parent (other test runs on the machine may run theirs).
func pluginPIDs(t *testing.T, parent int) []int {
	t.Helper()
	return processesOf(t, "stepwise-plugin-example", parent)
}

// processesOf lists the running processes of the plugin named plugin (its executable's
// name) whose parent is parent. The operator runs a verified copy of each plugin from a
// private directory, named after the plugin with a random suffix.
func processesOf(t *testing.T, plugin string, parent int) []int {
	t.Helper()
	procs, err := framework.Processes(func(p framework.Process) bool {
		name := filepath.Base(p.Exe)
		return p.PPID == parent && (name == plugin || strings.HasPrefix(name, plugin+"-"))
	})
	require.NoError(t, err)
	pids := make([]int, 0, len(procs))
	for _, p := range procs {
		pids = append(pids, p.PID)
	}
	return pids
}

func TestPluginExecutorMixedWithBuiltIn(t *testing.T) {
	// Not parallel: it restarts the shared operator, which another test may have
	// restarted without plugins, and checks that stopping it stops its plugins.
	// The operator started by TestMain runs the example plugin once it has loaded it.
	old := operator.PID()
	require.Eventually(t, func() bool { return len(pluginPIDs(t, old)) > 0 }, 30*time.Second, 50*time.Millisecond,
		"the operator never started its plugins; log %s", operator.Log)
	// Not checked: the operator may exit non-zero on SIGTERM; it must be replaced below
	// whatever happened to it, and its plugins must be gone.
	if err := operator.Stop(); err != nil {
		t.Logf("stop operator: %v", err)
	}
	// Orphans would be re-parented, so look for every process of the plugin binary whose
	// parent is gone or is the stopped operator: none may be left once it has exited.
	assert.Eventually(t, func() bool { return len(pluginPIDs(t, old)) == 0 && len(pluginPIDs(t, 1)) == 0 }, 10*time.Second, 50*time.Millisecond,
		"plugin processes outlive the operator")
	var err error
	operator, err = cluster.StartOperator(pluginArgs()...)
	require.NoError(t, err)

	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	client := stepwiseClient(t)

	p := recordPipeline(ns, "mixed", "runner",
		recordStep("first", nil),
		v1alpha1.Step{Name: "greet", Executor: "example.greet", With: map[string]string{"name": "Ada"}},
		recordStep("last", map[string]string{"output": "$(steps.greet.outputs.greeting)"}),
	)
	_, err = client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)

	out, err := kubectl(t, "wait", "--for=condition=Ready", "--timeout=60s", "-n", ns, "pipeline/mixed")
	require.NoError(t, err, "kubectl wait: %s (operator log %s)", out, operator.Log)
	got := waitPipeline(t, ns, "mixed", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })
	require.Len(t, got.Status.Steps, 3)
	assert.Equal(t, "Hello, Ada!", got.Status.Steps[1].Outputs["greeting"])
	assert.Equal(t, "Hello, Ada!", got.Status.Steps[2].Outputs["value"], "plugin outputs flow to later steps")
	assert.Len(t, pluginPIDs(t, operator.PID()), 1, "one plugin process, started once")
	assert.Equal(t, []string{
		"first/PreCreate", "first/Create", "first/PostCreate",
		"last/PreCreate", "last/Create", "last/PostCreate",
	}, recordedCalls(t, ns, "stepwise-record-mixed"))

	require.NoError(t, client.StepwiseV1alpha1().Pipelines(ns).Delete(ctx, "mixed", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := client.StepwiseV1alpha1().Pipelines(ns).Get(ctx, "mixed", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 100*time.Millisecond, "pipeline was not deleted; operator log %s", operator.Log)
	assert.Equal(t, []string{
		"last/PreDelete", "last/Delete", "last/PostDelete",
		"first/PreDelete", "first/Delete", "first/PostDelete",
	}, recordedCalls(t, ns, "stepwise-record-mixed")[6:], "teardown in reverse, the plugin step between")

	// A plugin's permanent error fails the step at once with the plugin's reason.
	_, err = client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, recordPipeline(ns, "nameless", "runner",
		v1alpha1.Step{Name: "greet", Executor: "example.greet"}), metav1.CreateOptions{})
	require.NoError(t, err)
	failed := waitPipeline(t, ns, "nameless", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineFailed })
	ready := meta.FindStatusCondition(failed.Status.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Contains(t, ready.Message, `parameter "name" is required`)
	assert.Equal(t, int32(1), failed.Status.Steps[0].Attempts, "a permanent error is not retried")
}

// restartOperator replaces the shared operator with one started with args, and puts back
// one with the usual plugins when the test ends.
func restartOperator(t *testing.T, args ...string) {
	t.Helper()
	if err := operator.Stop(); err != nil {
		t.Logf("stop operator: %v", err)
	}
	var err error
	operator, err = cluster.StartOperator(args...)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := operator.Stop(); err != nil {
			t.Logf("stop operator: %v", err)
		}
		operator, err = cluster.StartOperator(pluginArgs()...)
		require.NoError(t, err)
	})
}

func TestPluginWithWrongChecksumIsRefusedWithAClearCondition(t *testing.T) {
	// Not parallel: it replaces the shared operator.
	dir := t.TempDir()
	exe, err := os.ReadFile(filepath.Join(cluster.BinPath("plugins"), "stepwise-plugin-example"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stepwise-plugin-example"), exe, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "SHA256SUMS"),
		[]byte(strings.Repeat("0", 64)+"  stepwise-plugin-example\n"), 0o644))
	restartOperator(t, "--plugin-dir", dir)

	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	client := stepwiseClient(t)
	// The operator keeps running: a pipeline of built-in steps still goes to Ready...
	_, err = client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, recordPipeline(ns, "builtin", "runner", recordStep("only", nil)), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPipeline(t, ns, "builtin", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })

	// ...and one naming the refused plugin's executor waits on it, saying why.
	_, err = client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, recordPipeline(ns, "greet", "runner",
		v1alpha1.Step{Name: "greet", Executor: "example.greet", With: map[string]string{"name": "Ada"}}), metav1.CreateOptions{})
	require.NoError(t, err)
	waiting := waitPipeline(t, ns, "greet", time.Minute, func(p *v1alpha1.Pipeline) bool {
		ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		return ready != nil && ready.Reason == v1alpha1.ReasonPluginRefused
	})
	assert.Equal(t, v1alpha1.PipelineRunning, waiting.Status.Phase)
	step := meta.FindStatusCondition(waiting.Status.Steps[0].Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, step)
	assert.Equal(t, v1alpha1.ReasonPluginRefused, step.Reason)
	assert.Contains(t, step.Message, "its executor example.greet is served by the plugin stepwise-plugin-example, which the operator refused (ChecksumMismatch): ")
	assert.Contains(t, step.Message, "it did not start: its SHA-256 is ")
	assert.Contains(t, step.Message, "but the checksum file "+filepath.Join(dir, "SHA256SUMS")+" lists "+strings.Repeat("0", 64))
	require.NotEmpty(t, waiting.Status.BlockedBy)
	assert.Equal(t, v1alpha1.Blocker{Kind: v1alpha1.BlockerPlugin, Name: "stepwise-plugin-example", Step: "greet",
		Since: waiting.Status.BlockedBy[0].Since, Unblock: waiting.Status.BlockedBy[0].Unblock}, waiting.Status.BlockedBy[0])
	assert.Empty(t, processesOf(t, "stepwise-plugin-example", operator.PID()), "the refused plugin never ran")
}
