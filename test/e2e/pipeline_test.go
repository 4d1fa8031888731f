package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

func stepwiseClient(t *testing.T) clientset.Interface {
	t.Helper()
	c, err := clientset.NewForConfig(cluster.Config)
	require.NoError(t, err)
	return c
}

// serviceAccount creates a ServiceAccount; with allowConfigMaps it may read and write
// ConfigMaps in its namespace, which is all test.record needs.
func serviceAccount(t *testing.T, ns, name string, allowConfigMaps bool) {
	t.Helper()
	if !allowConfigMaps {
		cluster.ServiceAccount(t, ns, name)
		return
	}
	cluster.ServiceAccount(t, ns, name, rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update"},
	})
}

func recordPipeline(ns, name, sa string, steps ...v1alpha1.Step) *v1alpha1.Pipeline {
	return &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1alpha1.PipelineSpec{ServiceAccountName: sa, Steps: steps},
	}
}

func recordStep(name string, with map[string]string) v1alpha1.Step {
	return v1alpha1.Step{Name: name, Executor: "test.record", With: with}
}

// waitPipeline polls the pipeline until cond holds, failing the test after timeout.
func waitPipeline(t *testing.T, ns, name string, timeout time.Duration, cond func(*v1alpha1.Pipeline) bool) *v1alpha1.Pipeline {
	t.Helper()
	client := stepwiseClient(t)
	return framework.PollObject(t, timeout, func(ctx context.Context) (*v1alpha1.Pipeline, error) {
		return client.StepwiseV1alpha1().Pipelines(ns).Get(ctx, name, metav1.GetOptions{})
	}, cond, pipelineStatus, fmt.Sprintf("pipeline %s/%s (operator log: %s)", ns, name, operator.Log))
}

func pipelineStatus(p *v1alpha1.Pipeline) any {
	if p == nil {
		return nil
	}
	return p.Status
}

// recordedCalls reads what test.record wrote: "STEP/HOOK" per call, in order.
func recordedCalls(t *testing.T, ns, configMap string) []string {
	t.Helper()
	cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(t.Context(), configMap, metav1.GetOptions{})
	require.NoError(t, err)
	return strings.Split(cm.Data["calls"], "\n")
}

func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), cluster.BinPath("kubectl"), append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestPipelineRunsToReadyAndTearsDownInReverse(t *testing.T) {
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	client := stepwiseClient(t)

	p := recordPipeline(ns, "three", "runner",
		recordStep("first", map[string]string{"output": "from-first"}),
		recordStep("second", map[string]string{"output": "$(steps.first.outputs.value)-and-second"}),
		recordStep("third", nil),
	)
	_, err := client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)

	out, err := kubectl(t, "wait", "--for=condition=Ready", "--timeout=60s", "-n", ns, "pipeline/three")
	require.NoError(t, err, "kubectl wait: %s (operator log %s)", out, operator.Log)
	assert.Contains(t, out, "condition met")

	got := waitPipeline(t, ns, "three", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })
	assert.Equal(t, "3/3", got.Status.Progress)
	assert.Equal(t, got.Generation, got.Status.ObservedGeneration)
	assert.Contains(t, got.Finalizers, "stepwise.dev/teardown")
	ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, "Succeeded", ready.Reason)
	for _, s := range got.Status.Steps {
		c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady)
		require.NotNil(t, c, s.Name)
		assert.Equal(t, metav1.ConditionTrue, c.Status, s.Name)
		assert.Equal(t, v1alpha1.StepSucceeded, s.Phase, s.Name)
	}
	assert.Equal(t, "from-first-and-second", got.Status.Steps[1].Outputs["value"], "outputs flow to later steps")

	// Printer columns, through the short name and the category.
	out, err = kubectl(t, "get", "swp", "-n", ns)
	require.NoError(t, err, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	assert.Equal(t, []string{"NAME", "PHASE", "STEP", "PROGRESS", "AGE"}, strings.Fields(lines[0]))
	assert.Equal(t, []string{"three", "Succeeded", "3/3"}, strings.Fields(lines[1])[:3])
	out, err = kubectl(t, "get", "stepwise", "-n", ns, "-o", "name")
	require.NoError(t, err, out)
	assert.Equal(t, "pipeline.stepwise.dev/three", strings.TrimSpace(out))

	// The happy path writes no Event: the status says it all.
	events, err := cluster.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=three"})
	require.NoError(t, err)
	assert.Empty(t, events.Items, "no Event for steps that succeeded at once nor for the pipeline's success")

	calls := recordedCalls(t, ns, "stepwise-record-three")
	assert.Equal(t, []string{
		"first/PreCreate", "first/Create", "first/PostCreate",
		"second/PreCreate", "second/Create", "second/PostCreate",
		"third/PreCreate", "third/Create", "third/PostCreate",
	}, calls)

	// Delete: the teardown runs last step first, and then the object is gone.
	require.NoError(t, client.StepwiseV1alpha1().Pipelines(ns).Delete(ctx, "three", metav1.DeleteOptions{}))
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.StepwiseV1alpha1().Pipelines(ns).Get(ctx, "three", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "pipeline was not deleted; operator log %s", operator.Log)
	assert.Equal(t, []string{
		"third/PreDelete", "third/Delete", "third/PostDelete",
		"second/PreDelete", "second/Delete", "second/PostDelete",
		"first/PreDelete", "first/Delete", "first/PostDelete",
	}, recordedCalls(t, ns, "stepwise-record-three")[9:])
}

func TestOperatorRestartResumesWithoutRerunningSteps(t *testing.T) {
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	client := stepwiseClient(t)

	p := recordPipeline(ns, "resume", "runner",
		recordStep("first", nil),
		recordStep("gated", map[string]string{"gate": "true"}),
		recordStep("last", nil),
	)
	_, err := client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPipeline(t, ns, "resume", time.Minute, func(p *v1alpha1.Pipeline) bool {
		return len(p.Status.Steps) == 3 && p.Status.Steps[1].Phase == v1alpha1.StepRunning &&
			p.Status.Steps[1].Hook == v1alpha1.HookCreate
	})

	// Crash the operator while the gated step waits, then start a new one.
	require.NoError(t, operator.Kill())
	operator, err = cluster.StartOperator(pluginArgs()...)
	require.NoError(t, err)

	// Open the gate.
	require.NoError(t, framework.OpenGate(ctx, cluster.Client, ns, "stepwise-record-resume", "gated", "yes"))

	waitPipeline(t, ns, "resume", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })
	calls := recordedCalls(t, ns, "stepwise-record-resume")
	count := map[string]int{}
	for _, c := range calls {
		count[c]++
	}
	assert.Equal(t, 1, count["first/PreCreate"], "a completed step must not run again: %v", calls)
	assert.Equal(t, 1, count["first/PostCreate"], calls)
	assert.Equal(t, 1, count["gated/PreCreate"], "the restarted operator resumes at the hook it was in: %v", calls)
	assert.Equal(t, 1, count["last/PostCreate"], calls)
	assert.GreaterOrEqual(t, count["gated/Create"], 2, "the gated Create was looked at again")
}

func TestStepWithoutRBACFailsForbidden(t *testing.T) {
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "powerless", false)
	client := stepwiseClient(t)

	step := recordStep("touch", nil)
	step.Retry = &v1alpha1.RetryPolicy{Limit: 0}
	_, err := client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, recordPipeline(ns, "forbidden", "powerless", step), metav1.CreateOptions{})
	require.NoError(t, err)

	got := waitPipeline(t, ns, "forbidden", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineFailed })
	c := meta.FindStatusCondition(got.Status.Steps[0].Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, c)
	assert.Equal(t, "Forbidden", c.Reason)
	assert.Contains(t, c.Message, `"system:serviceaccount:`+ns+`:powerless" cannot get resource "configmaps"`,
		"the executor acted as the pipeline's ServiceAccount, not as the operator")
	ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, "StepFailed", ready.Reason)
	_, err = cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "stepwise-record-forbidden", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "nothing was written")
}

func TestAdmissionRejectsMalformedPipelines(t *testing.T) {
	ns := cluster.CreateNamespace(t)
	dyn, err := dynamic.NewForConfig(cluster.Config)
	require.NoError(t, err)
	pipelines := dyn.Resource(schema.GroupVersionResource{Group: "stepwise.dev", Version: "v1alpha1", Resource: "pipelines"}).Namespace(ns)

	step := func(name string) map[string]any { return map[string]any{"name": name, "executor": "test.noop"} }
	tests := []struct {
		name    string
		spec    map[string]any
		wantErr string
	}{
		{"duplicate step names", map[string]any{"steps": []any{step("a"), step("a")}}, "step names must be unique"},
		{"no steps", map[string]any{"steps": []any{}}, "spec.steps in body should have at least 1 items"},
		{"missing steps", map[string]any{}, "a pipeline has either steps or a templateRef"},
		{"step name with capitals", map[string]any{"steps": []any{step("Drain")}}, `spec.steps[0].name: Invalid value: "Drain"`},
		{"bad duration", map[string]any{"steps": []any{map[string]any{"name": "a", "executor": "x", "timeout": "ten minutes"}}}, `spec.steps[0].timeout: Invalid value: "ten minutes"`},
		{"unknown field", map[string]any{"steps": []any{map[string]any{"name": "a", "executor": "x", "timeoutt": "1m"}}}, `unknown field "spec.steps[0].timeoutt"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "stepwise.dev/v1alpha1", "kind": "Pipeline",
				"metadata": map[string]any{"name": "bad"}, "spec": tt.spec,
			}}
			_, err := pipelines.Create(t.Context(), obj, metav1.CreateOptions{FieldValidation: "Strict"})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}
