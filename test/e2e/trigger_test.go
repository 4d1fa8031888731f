package e2e

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

// retireTemplate is a template of test.record steps: "retire" waits at its gate until the
// test opens it, "forget" records and is done.
func retireTemplate(ns string) *v1alpha1.PipelineTemplate {
	return &v1alpha1.PipelineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "retire-node", Namespace: ns},
		Spec: v1alpha1.PipelineTemplateSpec{
			Params: []v1alpha1.TemplateParam{{Name: "node", Required: true}, {Name: "pool"}},
			Steps: []v1alpha1.Step{
				recordStep("retire", map[string]string{"gate": "true", "output": "$(params.node)"}),
				recordStep("forget", nil),
			},
		},
	}
}

// nodeTrigger is a trigger on the Nodes of the pool ns labelled stepwise.dev/retire=true.
func nodeTrigger(ns, sa string, concurrency int32) *v1alpha1.PipelineTrigger {
	return &v1alpha1.PipelineTrigger{
		ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: ns},
		Spec: v1alpha1.PipelineTriggerSpec{
			Resource: v1alpha1.TriggerResource{APIVersion: "v1", Kind: "Node"},
			// The pool keeps the test to its own nodes; other tests make nodes too.
			Selector:           &v1alpha1.LabelSelector{MatchLabels: map[string]string{"stepwise.dev/retire": "true", "pool": ns}},
			TemplateRef:        v1alpha1.TemplateRef{Name: "retire-node"},
			Params:             map[string]string{"node": "$(object.metadata.name)", "pool": "$(object.metadata.labels['pool'])"},
			ServiceAccountName: sa,
			Concurrency:        concurrency,
		},
	}
}

// triggerRetirer is the ServiceAccount "retirer" of ns: it may list and watch Nodes (a
// trigger on Nodes) and write ConfigMaps (test.record). It returns its name.
func triggerRetirer(t *testing.T, ns string) string {
	t.Helper()
	serviceAccount(t, ns, "retirer", true)
	cluster.GrantClusterWide(t, ns, "retirer", "trigger-retirer-"+ns,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"}})
	return "retirer"
}

// labelForRetirement labels a node stepwise.dev/retire=true.
func labelForRetirement(t *testing.T, node string) {
	t.Helper()
	_, err := cluster.Client.CoreV1().Nodes().Patch(t.Context(), node, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"stepwise.dev/retire":"true"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
}

// waitTrigger polls the trigger until cond holds, failing the test after timeout.
func waitTrigger(t *testing.T, ns, name string, timeout time.Duration, cond func(*v1alpha1.PipelineTrigger) bool) *v1alpha1.PipelineTrigger {
	t.Helper()
	client := stepwiseClient(t)
	return framework.PollObject(t, timeout, func(ctx context.Context) (*v1alpha1.PipelineTrigger, error) {
		return client.StepwiseV1alpha1().PipelineTriggers(ns).Get(ctx, name, metav1.GetOptions{})
	}, cond, func(tr *v1alpha1.PipelineTrigger) any { return tr.Status }, fmt.Sprintf("trigger %s/%s (operator log: %s)", ns, name, operator.Log))
}

// triggerPipelines lists the pipelines of trigger ns/name.
func triggerPipelines(t *testing.T, ns, name string) []v1alpha1.Pipeline {
	t.Helper()
	list, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).List(t.Context(),
		metav1.ListOptions{LabelSelector: v1alpha1.LabelTrigger + "=" + name})
	require.NoError(t, err)
	return list.Items
}

func readyReason(trig *v1alpha1.PipelineTrigger) string {
	if c := meta.FindStatusCondition(trig.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return string(c.Status) + "/" + c.Reason
	}
	return ""
}

// TestTriggerRetiresLabelledNodesTwoAtATime: five nodes labelled for retirement get one
// pipeline each, never more than two unfinished at a time, in the order they were made;
// the others wait in the trigger's queue, and all five finish.
func TestTriggerRetiresLabelledNodesTwoAtATime(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	triggerRetirer(t, ns)
	client := stepwiseClient(t)
	_, err := client.StepwiseV1alpha1().PipelineTemplates(ns).Create(ctx, retireTemplate(ns), metav1.CreateOptions{})
	require.NoError(t, err)

	var nodes []corev1.Node
	for range 5 {
		name := poolNode(t, ns)
		labelForRetirement(t, name)
		n, err := cluster.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		nodes = append(nodes, *n)
	}
	// The order of matching: oldest first, then by name.
	slices.SortFunc(nodes, func(a, b corev1.Node) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	var order []string
	for _, n := range nodes {
		order = append(order, n.Name)
	}
	// Made once every node is labelled, the trigger starts them in that order.
	_, err = client.StepwiseV1alpha1().PipelineTriggers(ns).Create(ctx, nodeTrigger(ns, "retirer", 2), metav1.CreateOptions{})
	require.NoError(t, err)

	// Two start, in order; three wait, in order.
	trig := waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return tr.Status.Matched == 5 && tr.Status.Running == 2 && tr.Status.Waiting == 3
	})
	assert.Equal(t, order[2:], trig.Status.Queue)
	assert.Equal(t, "True/"+v1alpha1.TriggerReasonActive, readyReason(trig))
	started := triggerPipelines(t, ns, "retire")
	require.Len(t, started, 2)
	var startedNodes []string
	for _, p := range started {
		startedNodes = append(startedNodes, p.Spec.Params["node"])
		assert.Equal(t, ns, p.Spec.Params["pool"])
		assert.Equal(t, p.Spec.Params["node"], p.Annotations[v1alpha1.AnnotationObject])
		assert.Equal(t, &v1alpha1.TemplateRef{Name: "retire-node"}, p.Spec.TemplateRef)
		assert.Equal(t, "retirer", p.Spec.ServiceAccountName)
		assert.True(t, strings.HasPrefix(p.Name, "retire-"+p.Spec.Params["node"]+"-"), p.Name)
	}
	assert.ElementsMatch(t, order[:2], startedNodes, "the oldest first")

	// Open each gate as its pipeline reaches it; never more than two unfinished.
	opened := map[string]bool{}
	maxUnfinished := 0
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		pipelines := triggerPipelines(t, ns, "retire")
		unfinished, succeeded := 0, 0
		for _, p := range pipelines {
			if p.Status.Phase == v1alpha1.PipelineSucceeded {
				succeeded++
				continue
			}
			unfinished++
			if !opened[p.Name] && len(p.Status.Steps) > 0 && strings.Contains(p.Status.Steps[0].Message, "waiting for key open.retire") {
				openGate(t, ns, "stepwise-record-"+p.Name, "retire")
				opened[p.Name] = true
			}
		}
		maxUnfinished = max(maxUnfinished, unfinished)
		if unfinished > 2 {
			return false, fmt.Errorf("%d pipelines unfinished at once, concurrency is 2", unfinished)
		}
		return succeeded == 5, nil
	})
	require.NoError(t, err, "operator log: %s", operator.Log)
	assert.Equal(t, 2, maxUnfinished)
	assert.Len(t, opened, 5)

	trig = waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return tr.Status.Succeeded == 5 && tr.Status.Running == 0
	})
	assert.Equal(t, int32(5), trig.Status.Matched)
	assert.Zero(t, trig.Status.Waiting)
	assert.Zero(t, trig.Status.Failed)
	assert.Empty(t, trig.Status.Queue)
	assert.Equal(t, "True/"+v1alpha1.TriggerReasonActive, readyReason(trig))
	assert.Equal(t, trig.Generation, trig.Status.ObservedGeneration)
	for _, p := range triggerPipelines(t, ns, "retire") {
		assert.Equal(t, p.Spec.Params["node"], p.Status.Steps[0].Outputs["value"], "the step ran with the node's name")
	}

	// The trigger said what it did, on itself.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := cluster.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=retire"})
		if err != nil {
			return false, err
		}
		counts := map[string]int32{}
		for _, e := range events.Items {
			counts[e.Reason] += max(e.Count, 1)
		}
		return counts[v1alpha1.TriggerReasonWaiting] == 1, nil
	})
	assert.NoError(t, err, "one Waiting Event for the objects the concurrency held back (and none per pipeline created)")

	// Every sync of this trigger went through: no API error, no refused write (the log is
	// the operator's, shared with the other tests: only this trigger's lines count).
	data, err := os.ReadFile(operator.Log)
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "Syncing trigger failed") {
			assert.NotContains(t, line, `trigger="`+ns+`/retire"`, "operator log %s", operator.Log)
		}
	}
}

// TestTriggerWhoseServiceAccountMayNotListNodesIsForbidden: a trigger whose ServiceAccount
// may not list and watch Nodes creates nothing and says nothing of them; given the right,
// it acts within seconds (the RBAC change is seen, long before the kept answer's minute
// runs out), and it stops as soon as the right is taken away.
func TestTriggerWhoseServiceAccountMayNotListNodesIsForbidden(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "powerless", true) // ConfigMaps only
	client := stepwiseClient(t)
	_, err := client.StepwiseV1alpha1().PipelineTemplates(ns).Create(ctx, retireTemplate(ns), metav1.CreateOptions{})
	require.NoError(t, err)
	node := poolNode(t, ns)
	labelForRetirement(t, node)
	_, err = client.StepwiseV1alpha1().PipelineTriggers(ns).Create(ctx, nodeTrigger(ns, "powerless", 2), metav1.CreateOptions{})
	require.NoError(t, err)

	trig := waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return readyReason(tr) == "False/"+v1alpha1.TriggerReasonForbidden
	})
	ready := meta.FindStatusCondition(trig.Status.Conditions, v1alpha1.ConditionReady)
	assert.Equal(t, "ServiceAccount "+ns+"/powerless may not list and watch nodes cluster-wide", ready.Message)
	assert.Equal(t, trig.Generation, ready.ObservedGeneration)
	assert.Empty(t, triggerPipelines(t, ns, "retire"))
	assert.Zero(t, trig.Status.Matched)
	assert.Empty(t, trig.Status.Queue)
	assert.NotContains(t, fmt.Sprint(trig.Status), node)

	// Given the right, it acts: within 20 s, well before the answer it keeps for a minute
	// (trigger.DefaultAccessTTL) expires.
	name := "trigger-lister-" + ns
	cluster.GrantClusterWide(t, ns, "powerless", name,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"}})
	waitTrigger(t, ns, "retire", 20*time.Second, func(tr *v1alpha1.PipelineTrigger) bool {
		return readyReason(tr) == "True/"+v1alpha1.TriggerReasonActive && tr.Status.Running == 1
	})
	require.Len(t, triggerPipelines(t, ns, "retire"), 1)

	// The right taken away, it stops acting as soon as the binding goes.
	require.NoError(t, cluster.Client.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{}))
	waitTrigger(t, ns, "retire", 20*time.Second, func(tr *v1alpha1.PipelineTrigger) bool {
		return readyReason(tr) == "False/"+v1alpha1.TriggerReasonForbidden && tr.Status.Matched == 0
	})
}

// TestTriggerOnAKindTheInstallerDidNotAllow: a trigger on Secrets, which the operator does
// not watch, says which flag would allow it.
func TestTriggerOnAKindTheInstallerDidNotAllow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	trig := nodeTrigger(ns, "default", 1)
	trig.Spec.Resource = v1alpha1.TriggerResource{APIVersion: "v1", Kind: "Secret"}
	_, err := stepwiseClient(t).StepwiseV1alpha1().PipelineTriggers(ns).Create(ctx, trig, metav1.CreateOptions{})
	require.NoError(t, err)
	got := waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return readyReason(tr) == "False/"+v1alpha1.TriggerReasonResourceNotAllowed
	})
	ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
	assert.Contains(t, ready.Message, `add "secrets" to --trigger-resources`)
	assert.Empty(t, triggerPipelines(t, ns, "retire"))
}
