package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// nodeRetirer creates a ServiceAccount with what node retirement needs, cluster-wide, and
// the more rules given.
func nodeRetirer(t *testing.T, ns string, more ...rbacv1.PolicyRule) string {
	t.Helper()
	const sa = "retirer"
	cluster.ServiceAccount(t, ns, sa)
	cluster.GrantClusterWide(t, ns, sa, "retirer-"+ns, append([]rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"get"}},
	}, more...)...)
	return sa
}

// poolNode creates a kwok node labelled pool=POOL, deleted at cleanup if still there.
func poolNode(t *testing.T, pool string) string {
	t.Helper()
	ctx := t.Context()
	node, err := cluster.CreateFakeNode(ctx, "retire-"+rand.String(6))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cluster.Client.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{})
	})
	patch := fmt.Sprintf(`{"metadata":{"labels":{"pool":%q}}}`, pool)
	_, err = cluster.Client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	return node.Name
}

// webWithBudget runs a Deployment of 3 pods in the pool and a PDB with minAvailable, and
// waits until all 3 run.
func webWithBudget(t *testing.T, ns, pool string, minAvailable int) {
	t.Helper()
	ctx := t.Context()
	labels := map[string]string{"app": "web"}
	replicas := int32(3)
	_, err := cluster.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"pool": pool},
					Containers:   []corev1.Container{{Name: "web", Image: "registry.invalid/web:1"}},
				},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	minAvail := intstr.FromInt32(int32(minAvailable))
	_, err = cluster.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web-pdb"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvail, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		pdb, err := cluster.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web-pdb", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return pdb.Status.CurrentHealthy == 3 && pdb.Status.ObservedGeneration == pdb.Generation, nil
	})
	require.NoError(t, err, "3 pods never ran under the PDB")
}

func retirePipeline(ns, sa, node string, drainWith map[string]string) *v1alpha1.Pipeline {
	with := map[string]string{"node": "$(params.node)"}
	for k, v := range drainWith {
		with[k] = v
	}
	return &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: ns},
		Spec: v1alpha1.PipelineSpec{
			ServiceAccountName: sa,
			Params:             map[string]string{"node": node},
			Steps: []v1alpha1.Step{
				{Name: "cordon", Executor: "node.cordon", With: map[string]string{"node": "$(params.node)"}},
				{Name: "drain", Executor: "node.drain", With: with},
				{Name: "forget", Executor: "node.delete", With: map[string]string{"node": "$(params.node)"}},
			},
		},
	}
}

func TestNodeRetirementWaitsForThePDB(t *testing.T) {
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	sa := nodeRetirer(t, ns)
	node := poolNode(t, ns)
	webWithBudget(t, ns, ns, 2)

	_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(ctx,
		retirePipeline(ns, sa, node, map[string]string{"timeout": "3m"}), metav1.CreateOptions{})
	require.NoError(t, err)

	// One pod may go; its replacement cannot run (the only node is cordoned), so the PDB
	// blocks the rest, and the step says so.
	blocked := waitPipeline(t, ns, "retire", 90*time.Second, func(p *v1alpha1.Pipeline) bool {
		return len(p.Status.Steps) == 3 && strings.Contains(p.Status.Steps[1].Message, "disruption budget web-pdb")
	})
	assert.Equal(t, v1alpha1.StepRunning, blocked.Status.Steps[1].Phase)
	assert.Contains(t, blocked.Status.Steps[1].Message, "pods left")
	assert.Equal(t, []v1alpha1.BlockingObject{{Kind: v1alpha1.KindPodDisruptionBudget, Namespace: ns, Name: "web-pdb"}},
		blocked.Status.Steps[1].BlockedBy, "the drain names the budget as data")
	// The pipeline says so too, with since when and what would let it go on, and kubectl
	// stepwise why prints it.
	blocked = waitPipeline(t, ns, "retire", 30*time.Second, func(p *v1alpha1.Pipeline) bool { return len(p.Status.BlockedBy) == 1 })
	b := blocked.Status.BlockedBy[0]
	assert.Equal(t, v1alpha1.Blocker{Kind: v1alpha1.KindPodDisruptionBudget, Namespace: ns, Name: "web-pdb", Step: "drain", Since: b.Since,
		Unblock: "the PodDisruptionBudget " + ns + "/web-pdb allows a disruption: more of its pods healthy, or a lower minAvailable (kubectl get pdb web-pdb -n " + ns + ")"}, b)
	require.NotNil(t, b.Since)
	code, out, errOut := stepwiseCLI(t, cluster.Kubeconfig, "why", "retire", "-n", ns)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `PodDisruptionBudget\s+drain\s+`+ns+`/web-pdb\s+\S+ ago\s+the PodDisruptionBudget`, out)
	t.Logf("kubectl stepwise why retire:\n%s", out)
	n, err := cluster.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, n.Spec.Unschedulable, "cordoned")

	// Room elsewhere: replacements run there, the PDB allows the rest, the drain finishes.
	poolNode(t, ns)
	done := waitPipeline(t, ns, "retire", 2*time.Minute, func(p *v1alpha1.Pipeline) bool {
		return p.Status.Phase == v1alpha1.PipelineSucceeded
	})
	assert.Equal(t, "3", done.Status.Steps[1].Outputs["podsEvicted"])
	assert.Equal(t, "true", done.Status.Steps[0].Outputs["wasSchedulable"])
	_, err = cluster.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "node.delete removed the Node")
	pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	require.NoError(t, err)
	assert.Empty(t, pods.Items, "the node was empty")
}

func TestNodeDrainForcePolicyAfterDeadline(t *testing.T) {
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	sa := nodeRetirer(t, ns)
	node := poolNode(t, ns)
	webWithBudget(t, ns, ns, 3) // never allows an eviction

	_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(ctx,
		retirePipeline(ns, sa, node, map[string]string{"timeout": "3s", "policy": "Force", "gracePeriodSeconds": "0"}), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPipeline(t, ns, "retire", 2*time.Minute, func(p *v1alpha1.Pipeline) bool {
		return p.Status.Phase == v1alpha1.PipelineSucceeded
	})
	_, err = cluster.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
}

func TestNodeCordonWithoutRBACIsForbiddenAndTouchesNothing(t *testing.T) {
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "powerless", false)
	node := poolNode(t, ns)

	p := retirePipeline(ns, "powerless", node, nil)
	p.Spec.Steps[0].Retry = &v1alpha1.RetryPolicy{Limit: 0}
	_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	got := waitPipeline(t, ns, "retire", time.Minute, func(p *v1alpha1.Pipeline) bool {
		return p.Status.Phase == v1alpha1.PipelineFailed
	})
	c := meta.FindStatusCondition(got.Status.Steps[0].Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, c)
	assert.Equal(t, "Forbidden", c.Reason)
	assert.Equal(t, "cordon", got.Status.CurrentStep)
	n, err := cluster.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, n.Spec.Unschedulable, "the node was not touched")
	assert.Equal(t, v1alpha1.StepPending, got.Status.Steps[1].Phase, "drain never started")
}
