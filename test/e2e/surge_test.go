package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/tasks/node"
)

// surgingRetirer is nodeRetirer with the rights a replacement first needs (get ReplicaSets,
// get and patch Deployments) and the drain's Node conditions need (patch nodes/status), and
// the more rules given.
func surgingRetirer(t *testing.T, ns string, more ...rbacv1.PolicyRule) string {
	t.Helper()
	return nodeRetirer(t, ns, append([]rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: []string{"get"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "patch"}},
	}, more...)...)
}

// singleReplicaWithBudget runs a Deployment web of one pod in the pool, under a PDB of
// minAvailable 1.
func singleReplicaWithBudget(t *testing.T, ns, pool string) {
	t.Helper()
	deploymentOf(t, ns, "web", pool, map[string]string{"app": "web"})
	budgetOfOne(t, ns, "web")
}

// budgetOfOne puts the pod of Deployment app under a PDB APP-pdb of minAvailable 1, and
// waits until the budget counts it.
func budgetOfOne(t *testing.T, ns, app string) {
	t.Helper()
	one := intstr.FromInt32(1)
	_, err := cluster.Client.PolicyV1().PodDisruptionBudgets(ns).Create(t.Context(), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: app + "-pdb"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitBudgetHealthy(t, ns, app+"-pdb", 1)
}

// availability watches the Deployment web of ns until stopped: the fewest replicas it
// had available and the most pods it had that were not going away.
type availability struct {
	mu               sync.Mutex
	fewest, mostPods int32
	samples          int
	// draining: the node was seen with DrainInProgress True.
	draining bool
}

func watchAvailability(t *testing.T, ns, nodeName string) (*availability, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	a := &availability{fewest: 1 << 30}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// A poll, not a watch: it samples what a client would see, often enough to see a
		// gap of one eviction (kwok starts a pod in well under a second).
		_ = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			d, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return false, nil
			}
			var live int32
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil {
					live++
				}
			}
			n, err := cluster.Client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			a.mu.Lock()
			a.fewest, a.mostPods = min(a.fewest, d.Status.AvailableReplicas), max(a.mostPods, live)
			a.draining = a.draining || conditionIs(n, corev1.NodeDrainInProgress, corev1.ConditionTrue)
			a.samples++
			a.mu.Unlock()
			return false, nil
		})
	}()
	return a, func() { cancel(); <-done }
}

func conditionIs(n *corev1.Node, kind corev1.NodeConditionType, status corev1.ConditionStatus) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == kind {
			return c.Status == status
		}
	}
	return false
}

// TestDrainReplacesASingleReplicaFirst is examples/retire-node-single-replica.yaml, watched:
// a Deployment of one replica under a PDB of minAvailable 1, which kubectl's drain could
// never evict, is drained without ever having no available replica, never more than one
// extra pod, and with its replicas back at one after the drain; the Node says DrainInProgress
// while it is drained, then Drained. (The Node is kept, to read its conditions at the end.)
func TestDrainReplacesASingleReplicaFirst(t *testing.T) {
	t.Parallel() // its own nodes, namespace and Deployments; its DrainRule selects its own pod only
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	sa := surgingRetirer(t, ns)
	retired := poolNode(t, ns)
	singleReplicaWithBudget(t, ns, ns)
	poolNode(t, ns) // where the replacement goes

	watched, stop := watchAvailability(t, ns, retired)
	p := retirePipeline(ns, sa, retired, map[string]string{"timeout": "3m"})
	p.Spec.Steps = p.Spec.Steps[:2] // cordon, drain
	_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	done := waitPipeline(t, ns, "retire", 3*time.Minute, func(p *v1alpha1.Pipeline) bool {
		return p.Status.Phase == v1alpha1.PipelineSucceeded || p.Status.Phase == v1alpha1.PipelineFailed
	})
	stop()
	require.Equal(t, v1alpha1.PipelineSucceeded, done.Status.Phase, "%+v", done.Status)

	assert.Equal(t, "1", done.Status.Steps[1].Outputs[node.OutputPodsEvicted], "%+v", done.Status.Steps[1])
	assert.Equal(t, ns+"/web", done.Status.Steps[1].Created["surgedDeployments"], "recorded before it was scaled up, for teardown")
	watched.mu.Lock()
	defer watched.mu.Unlock()
	t.Logf("%d samples: fewest available %d, most pods %d", watched.samples, watched.fewest, watched.mostPods)
	assert.Positive(t, watched.samples)
	assert.Equal(t, int32(1), watched.fewest, "never without an available replica")
	assert.LessOrEqual(t, watched.mostPods, int32(2), "never more than the one extra pod of the surge")
	assert.True(t, watched.draining, "the Node said DrainInProgress")

	d, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(1), *d.Spec.Replicas, "replicas restored")
	assert.NotContains(t, d.Annotations, node.SurgedByAnnotation)
	n, err := cluster.Client.CoreV1().Nodes().Get(ctx, retired, metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, conditionIs(n, corev1.NodeDrained, corev1.ConditionTrue), "%+v", n.Status.Conditions)
	assert.True(t, conditionIs(n, corev1.NodeDrainInProgress, corev1.ConditionFalse), "%+v", n.Status.Conditions)
}

// deploymentOf runs a Deployment of one pod with labels in the pool, its pod spec changed
// by edits, and waits until it is available.
func deploymentOf(t *testing.T, ns, name, pool string, labels map[string]string, edits ...func(*corev1.PodSpec)) {
	t.Helper()
	ctx := t.Context()
	one := int32(1)
	spec := corev1.PodSpec{
		NodeSelector: map[string]string{"pool": pool},
		Containers:   []corev1.Container{{Name: name, Image: "registry.invalid/" + name + ":1"}},
	}
	for _, edit := range edits {
		edit(&spec)
	}
	_, err := cluster.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 1, nil
	})
	require.NoError(t, err, "the pod of %s never became available", name)
}

// TestDrainFollowsTheClustersRulesAndTheSkipLabel: a DrainRule puts the pods it selects
// last, and a pod labelled stepwise.dev/drain=skip stays on the node the drain empties.
func TestDrainFollowsTheClustersRulesAndTheSkipLabel(t *testing.T) {
	t.Parallel() // its own nodes, namespace and Deployments; its DrainRule selects its own pod only
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	sa := surgingRetirer(t, ns)
	retired := poolNode(t, ns)
	lastLabel := map[string]string{"app": "last", "drain-order": ns} // selects this test's pod only
	deploymentOf(t, ns, "first", ns, map[string]string{"app": "first"})
	deploymentOf(t, ns, "last", ns, lastLabel)
	deploymentOf(t, ns, "cache", ns, map[string]string{"app": "cache", v1alpha1.DrainLabel: v1alpha1.DrainSkip})
	rule, err := stepwiseClient(t).StepwiseV1alpha1().DrainRules().Create(ctx, &v1alpha1.DrainRule{
		ObjectMeta: metav1.ObjectMeta{Name: "last-" + ns},
		Spec: v1alpha1.DrainRuleSpec{Behavior: v1alpha1.DrainBehaviorDrain, Order: 10,
			PodSelector: &v1alpha1.LabelSelector{MatchLabels: map[string]string{"drain-order": ns}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = stepwiseClient(t).StepwiseV1alpha1().DrainRules().Delete(context.Background(), rule.Name, metav1.DeleteOptions{})
	})

	// When each app's pod was first seen going from the node.
	var mu sync.Mutex
	going := map[string]time.Time{}
	watchCtx, stop := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		_ = wait.PollUntilContextCancel(watchCtx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + retired})
			if err != nil {
				return false, nil
			}
			mu.Lock()
			defer mu.Unlock()
			// A pod is going once it is terminating or gone (kwok removes an evicted pod
			// at once): an app whose pod is not on the node and running is going.
			running := map[string]bool{}
			for _, p := range pods.Items {
				running[p.Labels["app"]] = p.DeletionTimestamp == nil
			}
			for _, app := range []string{"first", "last", "cache"} {
				if _, seen := going[app]; !seen && !running[app] {
					going[app] = time.Now()
				}
			}
			return false, nil
		})
	}()
	p := retirePipeline(ns, sa, retired, map[string]string{"timeout": "3m", "replacement": "None"})
	p.Spec.Steps = p.Spec.Steps[:2] // cordon, drain: the node stays, to see what is left on it
	_, err = stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	done := waitPipeline(t, ns, "retire", 3*time.Minute, func(p *v1alpha1.Pipeline) bool {
		return p.Status.Phase == v1alpha1.PipelineSucceeded || p.Status.Phase == v1alpha1.PipelineFailed
	})
	stop()
	<-watched
	require.Equal(t, v1alpha1.PipelineSucceeded, done.Status.Phase, "%+v", done.Status)
	assert.Equal(t, "2", done.Status.Steps[1].Outputs[node.OutputPodsEvicted], "%+v", done.Status.Steps[1])
	assert.Contains(t, done.Status.Steps[1].Message, "1 pod left on the node by the drain's rules")

	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, going, "first")
	require.Contains(t, going, "last")
	assert.True(t, going["first"].Before(going["last"]), "the DrainRule's pod went last: %v", going)
	assert.NotContains(t, going, "cache", "the skip label kept the cache")
	pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=cache"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1)
	assert.Equal(t, retired, pods.Items[0].Spec.NodeName, "still on the drained node")
}

// TestADrainTornDownWhileItWaitsOnAReplacementScalesBack: with no other node for the
// replacement, the drain waits on the Deployment it scaled up, and says so (kubectl
// stepwise why); the pipeline deleted then, its teardown scales the Deployment back and
// uncordons the node, and the pod was never evicted.
func TestADrainTornDownWhileItWaitsOnAReplacementScalesBack(t *testing.T) {
	t.Parallel() // its own nodes, namespace and Deployments; its DrainRule selects its own pod only
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	sa := surgingRetirer(t, ns)
	retired := poolNode(t, ns)
	singleReplicaWithBudget(t, ns, ns)

	p := retirePipeline(ns, sa, retired, map[string]string{"timeout": "5m"})
	_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPipeline(t, ns, "retire", 90*time.Second, func(p *v1alpha1.Pipeline) bool {
		return len(p.Status.BlockedBy) == 1 && p.Status.BlockedBy[0].Kind == v1alpha1.KindDeployment
	})
	d, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(2), *d.Spec.Replicas, "scaled up for the replacement")
	code, out, errOut := stepwiseCLI(t, cluster.Kubeconfig, "why", "retire", "-n", ns)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `Deployment\s+drain\s+`+ns+`/web\s+.*every replica of Deployment `+ns+`/web`, out)

	require.NoError(t, stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Delete(ctx, "retire", metav1.DeleteOptions{}))
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Get(ctx, "retire", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "the pipeline's teardown did not finish; operator log %s", operator.Log)
	d, err = cluster.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(1), *d.Spec.Replicas, "scaled back in teardown")
	assert.NotContains(t, d.Annotations, node.SurgedByAnnotation)
	n, err := cluster.Client.CoreV1().Nodes().Get(ctx, retired, metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, n.Spec.Unschedulable, "uncordoned in teardown")
	assert.False(t, conditionIs(n, corev1.NodeDrainInProgress, corev1.ConditionTrue), "%+v", n.Status.Conditions)
	pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + retired})
	require.NoError(t, err)
	assert.Len(t, pods.Items, 1, "the pod was never evicted")
}
