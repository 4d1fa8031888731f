package e2e

import (
	"context"
	"fmt"
	"slices"
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
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// fleetRetirer is a ServiceAccount with what node retirement needs, and the right to list
// and watch Nodes that a trigger on Nodes needs.
func fleetRetirer(t *testing.T, ns string) string {
	t.Helper()
	sa := nodeRetirer(t, ns)
	cluster.GrantClusterWide(t, ns, sa, "node-lister-"+ns,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"}})
	return sa
}

// retireNodeTemplate is node retirement as a template: cordon → drain → delete, torn down
// (uncordoned) when a step fails for good.
func retireNodeTemplate(ns, drainTimeout string) *v1alpha1.PipelineTemplate {
	node := map[string]string{"node": "$(params.node)"}
	return &v1alpha1.PipelineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "retire-node", Namespace: ns},
		Spec: v1alpha1.PipelineTemplateSpec{
			Params:    []v1alpha1.TemplateParam{{Name: "node", Required: true}},
			OnFailure: v1alpha1.FailureTeardown,
			Steps: []v1alpha1.Step{
				{Name: "cordon", Executor: "node.cordon", With: node},
				{Name: "drain", Executor: "node.drain", With: map[string]string{"node": "$(params.node)", "timeout": drainTimeout}},
				{Name: "forget", Executor: "node.delete", With: node},
			},
		},
	}
}

// spreadWeb runs a Deployment of one pod on each of the pool's nodes that exist now (a
// required anti-affinity puts at most one on a node), behind a PodDisruptionBudget that
// lets one pod be disrupted at a time, and waits until every pod runs.
func spreadWeb(t *testing.T, ns, pool string, replicas int32) {
	t.Helper()
	ctx := t.Context()
	labels := map[string]string{"app": "web"}
	_, err := cluster.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"pool": pool},
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
							LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: corev1.LabelHostname,
						}},
					}},
					Containers: []corev1.Container{{Name: "web", Image: "registry.invalid/web:1"}},
				},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	maxUnavailable := intstr.FromInt32(1)
	_, err = cluster.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web-pdb"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &maxUnavailable, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitBudgetHealthy(t, ns, "web-pdb", replicas)
}

// waitBudgetHealthy waits until the PodDisruptionBudget counts healthy pods.
func waitBudgetHealthy(t *testing.T, ns, name string, healthy int32) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		pdb, err := cluster.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return pdb.Status.CurrentHealthy == healthy && pdb.Status.ObservedGeneration == pdb.Generation, nil
	})
	require.NoError(t, err, "%d pods never ran under PodDisruptionBudget %s", healthy, name)
}

// podNodes maps each pod of the namespace to its node.
func podNodes(t *testing.T, ns string) map[string]string {
	t.Helper()
	pods, err := cluster.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p.Spec.NodeName
		}
	}
	return out
}

// fleetWatch is what a watch of a trigger's pipelines and of the pool's nodes saw.
type fleetWatch struct {
	// maxUnfinished is the most pipelines seen unfinished at once.
	maxUnfinished int
	// cordoned, tainted and deleted are the nodes seen cordoned, carrying the waiting
	// taint, and deleted.
	cordoned, tainted, deleted map[string]bool
	// taintedWhileRunning are the nodes last seen with the waiting taint while their
	// pipeline was unfinished. The trigger takes the taint off in the sync that creates the
	// pipeline, just after, and the two watches do not order their events: a node is seen
	// tainted for a moment after its pipeline appears. One that keeps the taint stays here.
	taintedWhileRunning map[string]bool
}

// watchFleet watches the trigger's pipelines and the pool's nodes until done says the
// fleet is done, or the timeout.
func watchFleet(t *testing.T, ns, trig, pool string, timeout time.Duration, done func(unfinished, finished int) bool) fleetWatch {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	pipes := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns)
	pipelineOpts := metav1.ListOptions{LabelSelector: v1alpha1.LabelTrigger + "=" + trig}
	list, err := pipes.List(ctx, pipelineOpts)
	require.NoError(t, err)
	pipelineOpts.ResourceVersion = list.ResourceVersion
	pw, err := pipes.Watch(ctx, pipelineOpts)
	require.NoError(t, err)
	defer pw.Stop()
	nodeOpts := metav1.ListOptions{LabelSelector: "pool=" + pool}
	nodes, err := cluster.Client.CoreV1().Nodes().List(ctx, nodeOpts)
	require.NoError(t, err)
	nodeOpts.ResourceVersion = nodes.ResourceVersion
	nw, err := cluster.Client.CoreV1().Nodes().Watch(ctx, nodeOpts)
	require.NoError(t, err)
	defer nw.Stop()

	seen := fleetWatch{cordoned: map[string]bool{}, tainted: map[string]bool{}, deleted: map[string]bool{}, taintedWhileRunning: map[string]bool{}}
	phase := map[string]bool{} // pipeline name -> finished
	nodeOf := map[string]string{}
	running := func(node string) bool {
		for name, finished := range phase {
			if nodeOf[name] == node && !finished {
				return true
			}
		}
		return false
	}
	noteNode := func(n *corev1.Node) {
		if n.Spec.Unschedulable {
			seen.cordoned[n.Name] = true
		}
		if !slices.ContainsFunc(n.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == v1alpha1.TaintWaiting }) {
			delete(seen.taintedWhileRunning, n.Name)
			return
		}
		seen.tainted[n.Name] = true
		if running(n.Name) {
			seen.taintedWhileRunning[n.Name] = true
		}
	}
	for i := range nodes.Items {
		noteNode(&nodes.Items[i])
	}
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("the fleet was not done within %s; seen %+v; pipelines %v", timeout, seen, phase)
		case ev, ok := <-pw.ResultChan():
			require.True(t, ok, "the pipeline watch ended")
			p, isPipeline := ev.Object.(*v1alpha1.Pipeline)
			if !isPipeline {
				continue
			}
			nodeOf[p.Name] = p.Spec.Params["node"]
			if ev.Type == watch.Deleted {
				delete(phase, p.Name)
			} else {
				phase[p.Name] = p.Status.Phase == v1alpha1.PipelineSucceeded || p.Status.Phase == v1alpha1.PipelineFailed
			}
		case ev, ok := <-nw.ResultChan():
			require.True(t, ok, "the node watch ended")
			n, isNode := ev.Object.(*corev1.Node)
			if !isNode {
				continue
			}
			if ev.Type == watch.Deleted {
				seen.deleted[n.Name] = true
				continue
			}
			noteNode(n)
		}
		unfinished, finished := 0, 0
		for _, f := range phase {
			if f {
				finished++
			} else {
				unfinished++
			}
		}
		seen.maxUnfinished = max(seen.maxUnfinished, unfinished)
		if done(unfinished, finished) {
			return seen
		}
	}
}

// TestTriggerRetiresAFleetBehindAPodDisruptionBudget: five kwok nodes, each running a pod
// of a Deployment behind a PodDisruptionBudget that allows one disruption at a time, are
// labelled for retirement; a trigger with concurrency 2 retires them: a watch never sees
// more than two retirements unfinished, every node is cordoned, drained (its pod moved to
// a spare node) and deleted, the nodes waiting their turn carry the PreferNoSchedule taint
// and lose it when their retirement starts, and the trigger's status counts down.
func TestTriggerRetiresAFleetBehindAPodDisruptionBudget(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	sa := fleetRetirer(t, ns)
	client := stepwiseClient(t)
	_, err := client.StepwiseV1alpha1().PipelineTemplates(ns).Create(ctx, retireNodeTemplate(ns, "3m"), metav1.CreateOptions{})
	require.NoError(t, err)

	var retiring []string
	for range 5 {
		retiring = append(retiring, poolNode(t, ns))
	}
	spreadWeb(t, ns, ns, 5)
	onRetiring := podNodes(t, ns)
	require.Len(t, onRetiring, 5)
	for _, node := range onRetiring {
		assert.Contains(t, retiring, node, "one pod on each node to retire")
	}
	for range 5 {
		poolNode(t, ns) // spares, where the pods go
	}
	for _, node := range retiring {
		labelForRetirement(t, node)
	}

	// Its status counts down as it goes: a watch sees every status it writes.
	triggers := client.StepwiseV1alpha1().PipelineTriggers(ns)
	tw, err := triggers.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=retire"})
	require.NoError(t, err)
	defer tw.Stop()
	var counts []string
	countsDone := make(chan struct{})
	go func() {
		defer close(countsDone)
		for ev := range tw.ResultChan() {
			got, ok := ev.Object.(*v1alpha1.PipelineTrigger)
			if !ok {
				continue
			}
			s := got.Status
			c := fmt.Sprintf("running %d waiting %d succeeded %d", s.Running, s.Waiting, s.Succeeded)
			if len(counts) == 0 || counts[len(counts)-1] != c {
				counts = append(counts, c)
			}
			if s.Succeeded == 5 && s.Running == 0 {
				return
			}
		}
	}()

	trig := nodeTrigger(ns, sa, 2)
	trig.Spec.Params = map[string]string{"node": "$(object.metadata.name)"}
	trig.Spec.TaintWaiting = true
	_, err = triggers.Create(ctx, trig, metav1.CreateOptions{})
	require.NoError(t, err)

	seen := watchFleet(t, ns, "retire", ns, 4*time.Minute, func(unfinished, finished int) bool { return finished == 5 })
	select {
	case <-countsDone:
	case <-time.After(time.Minute):
		t.Fatal("the trigger's status never counted 5 succeeded")
	}
	assert.Equal(t, 2, seen.maxUnfinished, "never more than two unfinished, and two at once")
	for _, node := range retiring {
		assert.True(t, seen.cordoned[node], "%s cordoned", node)
		assert.True(t, seen.deleted[node], "%s deleted", node)
	}
	assert.Len(t, seen.tainted, 3, "the three nodes that waited were tainted: %v", seen.tainted)
	assert.Empty(t, seen.taintedWhileRunning, "a node loses the taint once its retirement starts")
	for _, p := range triggerPipelines(t, ns, "retire") {
		assert.Equal(t, v1alpha1.PipelineSucceeded, p.Status.Phase, p.Name)
		assert.Equal(t, "1", p.Status.Steps[1].Outputs["podsEvicted"], "%s: its pod was evicted", p.Name)
	}
	waitBudgetHealthy(t, ns, "web-pdb", 5)
	for pod, node := range podNodes(t, ns) {
		assert.NotContains(t, retiring, node, "pod %s runs on a spare", pod)
	}
	assert.Equal(t, "running 0 waiting 0 succeeded 5", counts[len(counts)-1], "counts seen: %v", counts)
	assert.Equal(t, "running 2 waiting 3 succeeded 0", counts[1], "counts seen: %v", counts)
	for i := 2; i < len(counts); i++ {
		var running, waiting, succeeded, prevRunning, prevWaiting, prevSucceeded int
		_, err := fmt.Sscanf(counts[i], "running %d waiting %d succeeded %d", &running, &waiting, &succeeded)
		require.NoError(t, err)
		_, err = fmt.Sscanf(counts[i-1], "running %d waiting %d succeeded %d", &prevRunning, &prevWaiting, &prevSucceeded)
		require.NoError(t, err)
		assert.LessOrEqual(t, waiting, prevWaiting, "counts seen: %v", counts)
		assert.GreaterOrEqual(t, succeeded, prevSucceeded, "counts seen: %v", counts)
		assert.LessOrEqual(t, running, 2, "counts seen: %v", counts)
	}
	got, err := client.StepwiseV1alpha1().PipelineTriggers(ns).Get(ctx, "retire", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, got.Finalizers, v1alpha1.FinalizerTaints)

	// Deleted, the trigger goes: no taint was left to remove.
	require.NoError(t, client.StepwiseV1alpha1().PipelineTriggers(ns).Delete(ctx, "retire", metav1.DeleteOptions{}))
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.StepwiseV1alpha1().PipelineTriggers(ns).Get(ctx, "retire", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "the trigger's finalizer was removed")
}

// TestTriggerTearsDownARetirementBlockedByAPodDisruptionBudget: a node runs the pods of a
// PodDisruptionBudget that allows no disruption; its retirement's drain waits, the
// trigger says which budget blocks it and that the next node waits for it; when the drain
// times out, the retirement is torn down (the node uncordoned, still there with its pod),
// ends Failed, and the next node's retirement takes its place in the budget.
func TestTriggerTearsDownARetirementBlockedByAPodDisruptionBudget(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	sa := fleetRetirer(t, ns)
	client := stepwiseClient(t)
	_, err := client.StepwiseV1alpha1().PipelineTemplates(ns).Create(ctx, retireNodeTemplate(ns, "8s"), metav1.CreateOptions{})
	require.NoError(t, err)

	stuck := poolNode(t, ns)
	webWithBudget(t, ns, ns, 3) // three pods on the only node, all of them required
	free := poolNode(t, ns)
	labelForRetirement(t, stuck)

	trig := nodeTrigger(ns, sa, 1)
	trig.Spec.Params = map[string]string{"node": "$(object.metadata.name)"}
	trig.Spec.FailureBudget = 2 // the blocked retirement's failure leaves room for the next
	_, err = client.StepwiseV1alpha1().PipelineTriggers(ns).Create(ctx, trig, metav1.CreateOptions{})
	require.NoError(t, err)
	// The stuck node's retirement starts first; the free node, labelled then, waits for it
	// (two nodes made in the same second would start in name order).
	waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool { return tr.Status.Running == 1 })
	labelForRetirement(t, free)

	// Its drain waits on the budget, and the trigger says so.
	blocked := waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return readyReason(tr) == "True/"+v1alpha1.TriggerReasonBlocked && tr.Status.Waiting == 1
	})
	ready := meta.FindStatusCondition(blocked.Status.Conditions, v1alpha1.ConditionReady)
	assert.Equal(t, "1 running pipeline waits on PodDisruptionBudget "+ns+"/web-pdb; 1 object waits", ready.Message)
	assert.Equal(t, []string{free}, blocked.Status.Queue)
	require.Len(t, blocked.Status.BlockedBy, 1, "as data")
	assert.Equal(t, v1alpha1.KindPodDisruptionBudget, blocked.Status.BlockedBy[0].Kind)
	assert.Equal(t, ns+"/web-pdb", blocked.Status.BlockedBy[0].Namespace+"/"+blocked.Status.BlockedBy[0].Name)
	code, out, errOut := stepwiseCLI(t, cluster.Kubeconfig, "why", "retire", "-n", ns)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `PodDisruptionBudget\s+`+ns+`/web-pdb\s+\S+ ago\s+the PodDisruptionBudget`, out)
	t.Logf("kubectl stepwise why retire (a trigger):\n%s", out)

	// The drain times out: what ran is torn down, the slot goes to the next node.
	done := waitTrigger(t, ns, "retire", 2*time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return tr.Status.Failed == 1 && tr.Status.Succeeded == 1 && tr.Status.Running == 0
	})
	assert.Equal(t, "True/"+v1alpha1.TriggerReasonActive, readyReason(done))
	var failed *v1alpha1.Pipeline
	for _, p := range triggerPipelines(t, ns, "retire") {
		if p.Spec.Params["node"] == stuck {
			failed = &p
		}
	}
	require.NotNil(t, failed)
	assert.Equal(t, v1alpha1.PipelineFailed, failed.Status.Phase)
	failedReady := meta.FindStatusCondition(failed.Status.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, failedReady)
	assert.Equal(t, v1alpha1.ReasonTornDownAfterFailure, failedReady.Reason)
	assert.True(t, strings.Contains(failedReady.Message, "drain") || strings.Contains(failedReady.Message, "DrainTimeout"), failedReady.Message)
	n, err := cluster.Client.CoreV1().Nodes().Get(ctx, stuck, metav1.GetOptions{})
	require.NoError(t, err, "the stuck node is still there")
	assert.False(t, n.Spec.Unschedulable, "uncordoned by the teardown")
	waitBudgetHealthy(t, ns, "web-pdb", 3)
	_, err = cluster.Client.CoreV1().Nodes().Get(ctx, free, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the next node was retired")
}
