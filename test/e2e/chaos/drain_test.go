package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/tasks/node"
)

// drainWatch follows Deployment web and its pods through every change the API server
// makes: the fewest replicas available, the most pods not going away, and how often the
// replicas went up and came down.
type drainWatch struct {
	mu                  sync.Mutex
	fewest, most        int32
	ups, downs, changes int
	live                map[types.UID]bool
}

func (w *drainWatch) deployment(d *appsv1.Deployment, last *int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.changes++
	w.fewest = min(w.fewest, d.Status.AvailableReplicas)
	replicas := ptr.Deref(d.Spec.Replicas, 1)
	switch {
	case replicas > *last:
		w.ups++
	case replicas < *last:
		w.downs++
	}
	*last = replicas
}

func (w *drainWatch) pod(p *corev1.Pod, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.live[p.UID] = !deleted && p.DeletionTimestamp == nil
	var n int32
	for _, live := range w.live {
		if live {
			n++
		}
	}
	w.most = max(w.most, n)
}

// follow watches until ctx ends, from the resource versions given (what the suite saw
// before the drain), so that no change between them is missed.
func (w *drainWatch) follow(ctx context.Context, ns string, d *appsv1.Deployment, pods *corev1.PodList) {
	last := ptr.Deref(d.Spec.Replicas, 1)
	deployments, err := cluster.Client.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=web", ResourceVersion: d.ResourceVersion})
	if err != nil {
		return
	}
	defer deployments.Stop()
	podWatch, err := cluster.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app=web", ResourceVersion: pods.ResourceVersion})
	if err != nil {
		return
	}
	defer podWatch.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-deployments.ResultChan():
			if !ok {
				return
			}
			if d, ok := ev.Object.(*appsv1.Deployment); ok {
				w.deployment(d, &last)
			}
		case ev, ok := <-podWatch.ResultChan():
			if !ok {
				return
			}
			if p, ok := ev.Object.(*corev1.Pod); ok {
				w.pod(p, ev.Type == watch.Deleted)
			}
		}
	}
}

// drainUnderKills is phase 5: examples/retire-node-single-replica.yaml (a Deployment of one
// replica under a PDB of minAvailable 1, drained with its replacement first) while the
// leader is SIGKILLed as soon as the drain recorded its scale-up, as soon as the Deployment
// is scaled up, and (full run) as soon as the pod is evicted: the Deployment never has
// no available replica nor more than the one extra pod, is scaled up once and back once,
// and the pipeline's teardown changes nothing after.
func (s *suite) drainUnderKills(ctx context.Context, cfg config) row {
	t, f := s.t, s.fleet
	begin, before := time.Now(), f.counters()
	ns := cluster.CreateNamespace(t)
	const sa = "retirer"
	cluster.ServiceAccount(t, ns, sa)
	cluster.GrantClusterWide(t, ns, sa, "retirer-"+ns,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"daemonsets", "replicasets"}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "patch"}},
	)
	s.poolNode(ctx, ns)
	s.poolNode(ctx, ns)
	d, pods := s.singleReplicaWithBudget(ctx, ns)
	// The node retired is the one the scheduler put the pod on; the replacement goes to
	// the other.
	retired := pods.Items[0].Spec.NodeName

	watchCtx, stopWatch := context.WithCancel(ctx)
	w := &drainWatch{fewest: 1 << 30, live: map[types.UID]bool{}}
	for i := range pods.Items {
		w.pod(&pods.Items[i], false)
	}
	watched := make(chan struct{})
	go func() { defer close(watched); w.follow(watchCtx, ns, d, pods) }()

	_, err := s.client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "retire"},
		Spec: v1alpha1.PipelineSpec{
			ServiceAccountName: sa,
			Steps: []v1alpha1.Step{
				{Name: "cordon", Executor: "node.cordon", With: map[string]string{"node": retired}},
				{Name: "drain", Executor: "node.drain", With: map[string]string{"node": retired, "timeout": "3m"}},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// The kills, each at the sight of the drain's next move.
	moves := []struct {
		what string
		seen func(context.Context) bool
	}{
		{"the drain recorded its scale-up", func(ctx context.Context) bool {
			p, err := s.client.StepwiseV1alpha1().Pipelines(ns).Get(ctx, "retire", metav1.GetOptions{})
			return err == nil && len(p.Status.Steps) > 1 && p.Status.Steps[1].Created["surgedDeployments"] != ""
		}},
		{"the Deployment is scaled up", func(ctx context.Context) bool {
			d, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			return err == nil && d.Annotations[node.SurgedByAnnotation] != ""
		}},
		{"the pod is evicted", func(ctx context.Context) bool {
			p, err := cluster.Client.CoreV1().Pods(ns).Get(ctx, pods.Items[0].Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err) || (err == nil && p.DeletionTimestamp != nil)
		}},
	}
	var failovers []failover
	for i, move := range moves[:min(len(moves), cfg.drainKills)] {
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, cfg.readyTimeout, true, func(ctx context.Context) (bool, error) { return move.seen(ctx), nil })
		if err != nil {
			last, _ := s.client.StepwiseV1alpha1().Pipelines(ns).Get(ctx, "retire", metav1.GetOptions{})
			require.NoError(t, err, "kill %d: %s never happened; the pipeline: %s\noperator log lines:\n%s",
				i+1, move.what, describe(last), f.grepLogs(ns+"/retire", 30))
		}
		t.Logf("phase 5: %s; killing the leader", move.what)
		failovers = append(failovers, s.killLeader(ctx, nil, true))
	}

	ref := &pipelineRef{phase: "5", ns: ns, name: "retire"}
	s.requireAllAt(ctx, []*pipelineRef{ref}, cfg.readyTimeout, "Ready", func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })
	// The teardown of a finished drain scales nothing.
	require.NoError(t, s.client.StepwiseV1alpha1().Pipelines(ns).Delete(ctx, "retire", metav1.DeleteOptions{}))
	for p, last := range s.waitGone(ctx, []*pipelineRef{ref}, cfg.readyTimeout) {
		t.Errorf("%s was not deleted: %s", p, describe(last))
	}
	final, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	// The watch has seen every change up to the final read before it stops.
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.ups == w.downs, nil
	})
	assert.NoError(t, err, "the watch never saw the Deployment scaled back")
	stopWatch()
	<-watched

	w.mu.Lock()
	defer w.mu.Unlock()
	assert.Equal(t, int32(1), ptr.Deref(final.Spec.Replicas, 0), "the replicas it had")
	assert.NotContains(t, final.Annotations, node.SurgedByAnnotation)
	assert.Equal(t, int32(1), w.fewest, "never without an available replica")
	assert.LessOrEqual(t, w.most, int32(2), "never more than the one extra pod of the surge")
	assert.Equal(t, 1, w.ups, "scaled up exactly once across the kills")
	assert.Equal(t, 1, w.downs, "scaled back exactly once across the kills")
	return row{
		phase: "5 drain, leader SIGKILL", pipelines: 1, n: f.counters().minus(before), failover: summary(failovers), wall: time.Since(begin),
		notes: []string{fmt.Sprintf("phase 5: %d changes of the Deployment watched: fewest available %d, most pods %d, scaled up %d×, back %d×",
			w.changes, w.fewest, w.most, w.ups, w.downs)},
	}
}

// poolNode creates a kwok node labelled pool=POOL.
func (s *suite) poolNode(ctx context.Context, pool string) string {
	n, err := cluster.CreateFakeNode(ctx, fmt.Sprintf("%s-%d", pool, time.Now().UnixNano()%100000))
	require.NoError(s.t, err)
	s.t.Cleanup(func() {
		_ = cluster.Client.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{})
	})
	_, err = cluster.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{"pool":%q}}}`, pool), metav1.PatchOptions{})
	require.NoError(s.t, err)
	return n.Name
}

// singleReplicaWithBudget runs Deployment web of one pod in the pool ns under a PDB of
// minAvailable 1, and returns it and its pods once the budget counts the pod.
func (s *suite) singleReplicaWithBudget(ctx context.Context, ns string) (*appsv1.Deployment, *corev1.PodList) {
	t := s.t
	labels := map[string]string{"app": "web"}
	_, err := cluster.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"pool": ns},
					Containers:   []corev1.Container{{Name: "web", Image: "registry.invalid/web:1"}},
				},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	one := intstr.FromInt32(1)
	_, err = cluster.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web-pdb"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	var d *appsv1.Deployment
	var pods *corev1.PodList
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		pdb, err := cluster.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web-pdb", metav1.GetOptions{})
		if err != nil || pdb.Status.CurrentHealthy != 1 || pdb.Status.ObservedGeneration != pdb.Generation {
			return false, nil
		}
		if d, err = cluster.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil || d.Status.AvailableReplicas != 1 {
			return false, nil
		}
		pods, err = cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		return err == nil && len(pods.Items) == 1, nil
	})
	require.NoError(t, err, "the pod of web never ran under its PDB")
	return d, pods
}
