package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops"
)

// heldTemplate's one step waits until the ConfigMap "held" of its namespace has the key
// open.hold: its pipelines stay unfinished, each holding its node, until the test says.
func heldTemplate(ns string) *v1alpha1.PipelineTemplate {
	return &v1alpha1.PipelineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "retire-node", Namespace: ns},
		Spec: v1alpha1.PipelineTemplateSpec{
			Params: []v1alpha1.TemplateParam{{Name: "node", Required: true}, {Name: "pool"}},
			Steps:  []v1alpha1.Step{recordStep("hold", map[string]string{"gate": "true", "configMap": "held"})},
		},
	}
}

// openHeld lets every held pipeline of ns go on.
func openHeld(t *testing.T, ns string) {
	t.Helper()
	_, err := cluster.Client.CoreV1().ConfigMaps(ns).Patch(t.Context(), "held", types.MergePatchType,
		[]byte(`{"data":{"open.hold":"yes"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
}

// createNodeBudget creates a NodeBudget counting the nodes of pool, deleted after the test.
func createNodeBudget(t *testing.T, name, pool string, maxUnavailable int32) {
	t.Helper()
	client := stepwiseClient(t)
	_, err := client.StepwiseV1alpha1().NodeBudgets().Create(t.Context(), &v1alpha1.NodeBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.NodeBudgetSpec{MaxUnavailable: maxUnavailable,
			NodeSelector: &v1alpha1.LabelSelector{MatchLabels: map[string]string{"pool": pool}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = client.StepwiseV1alpha1().NodeBudgets().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// mayUseBudget gives the ServiceAccount ns/sa the verb "use" on the budget, and only it.
func mayUseBudget(t *testing.T, ns, sa, budget string) {
	t.Helper()
	cluster.GrantClusterWide(t, ns, sa, "use-"+budget+"-"+ns, rbacv1.PolicyRule{APIGroups: []string{"stepwise.dev"},
		Resources: []string{"nodebudgets"}, ResourceNames: []string{budget}, Verbs: []string{v1alpha1.VerbUse}})
}

// halfTrigger is nodeTrigger named name, selecting the nodes labelled half=name too,
// naming the budget.
func halfTrigger(ns, name, sa, budget string, concurrency int32) *v1alpha1.PipelineTrigger {
	trig := nodeTrigger(ns, sa, concurrency)
	trig.Name = name
	trig.Spec.Selector.MatchLabels["half"] = name
	trig.Spec.NodeBudgetRef = &v1alpha1.NodeBudgetRef{Name: budget}
	return trig
}

// unfinishedOf counts the unfinished pipelines of ns.
func unfinishedOf(ctx context.Context, t *testing.T, ns string) (int, int) {
	list, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	unfinished := 0
	for i := range list.Items {
		if !list.Items[i].Finished() {
			unfinished++
		}
	}
	return unfinished, len(list.Items)
}

// TestTwoTriggersNeverExceedTheBudgetTheyShare: two triggers of concurrency 3 over three
// nodes each name one NodeBudget of 2: together they never hold more than 2 nodes, the
// one left out says NodeBudgetFull, and all six retire once the first ones end.
func TestTwoTriggersNeverExceedTheBudgetTheyShare(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	sa := triggerRetirer(t, ns)
	budget := "fleet-" + ns
	createNodeBudget(t, budget, ns, 2)
	mayUseBudget(t, ns, sa, budget)
	client := stepwiseClient(t)
	_, err := client.StepwiseV1alpha1().PipelineTemplates(ns).Create(ctx, heldTemplate(ns), metav1.CreateOptions{})
	require.NoError(t, err)
	for _, half := range []string{"a", "b"} {
		for range 3 {
			node := poolNode(t, ns)
			_, err := cluster.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"stepwise.dev/retire":"true","half":"`+half+`"}}}`), metav1.PatchOptions{})
			require.NoError(t, err)
		}
		_, err = client.StepwiseV1alpha1().PipelineTriggers(ns).Create(ctx, halfTrigger(ns, half, sa, budget, 3), metav1.CreateOptions{})
		require.NoError(t, err)
	}

	// Sample the unfinished pipelines until all six exist and are done.
	var most atomic.Int32
	sampleCtx, stop := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		_ = wait.PollUntilContextCancel(sampleCtx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			list, err := client.StepwiseV1alpha1().Pipelines(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			n := int32(0)
			for i := range list.Items {
				if !list.Items[i].Finished() {
					n++
				}
			}
			if n > most.Load() {
				most.Store(n)
			}
			return false, nil
		})
	}()
	waitTrigger(t, ns, "a", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return tr.Status.ObservedGeneration == tr.Generation && tr.Status.Matched == 3
	})
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		unfinished, _ := unfinishedOf(ctx, t, ns)
		return unfinished == 2, nil
	}))
	full := 0
	for _, name := range []string{"a", "b"} {
		tr, err := client.StepwiseV1alpha1().PipelineTriggers(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		if readyReason(tr) == "True/"+v1alpha1.TriggerReasonNodeBudgetFull {
			full++
			assert.Contains(t, tr.Status.Conditions[0].Message, "NodeBudget "+budget+" is full: 2 of 2 nodes unavailable")
		}
	}
	assert.GreaterOrEqual(t, full, 1, "a trigger that waits says the budget is full")

	openHeld(t, ns)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		unfinished, all := unfinishedOf(ctx, t, ns)
		return unfinished == 0 && all == 6, nil
	}), "operator log: %s", operator.Log)
	stop()
	<-sampled
	assert.Equal(t, int32(2), most.Load(), "never more than the budget's 2 at once, across both triggers")
}

// TestATriggerCannotUseABudgetItWasNotGiven: naming a NodeBudget takes the verb "use" on
// it; without it the trigger starts nothing and says which right it lacks, and the right
// given later counts within seconds.
func TestATriggerCannotUseABudgetItWasNotGiven(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns, sa := oneNodeToRetire(t, heldTemplate)
	budget := "theirs-" + ns
	createNodeBudget(t, budget, ns, 5)
	client := stepwiseClient(t)
	trig := nodeTrigger(ns, sa, 1)
	trig.Spec.NodeBudgetRef = &v1alpha1.NodeBudgetRef{Name: budget}
	_, err := client.StepwiseV1alpha1().PipelineTriggers(ns).Create(ctx, trig, metav1.CreateOptions{})
	require.NoError(t, err)

	refused := waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return readyReason(tr) == "False/"+v1alpha1.TriggerReasonForbidden
	})
	assert.Equal(t, fmt.Sprintf(`ServiceAccount %s/%s may not use NodeBudget %s (verb "use" on nodebudgets.stepwise.dev)`, ns, sa, budget),
		refused.Status.Conditions[0].Message)
	assert.Empty(t, triggerPipelines(t, ns, "retire"))

	mayUseBudget(t, ns, sa, budget)
	waitTrigger(t, ns, "retire", 30*time.Second, func(tr *v1alpha1.PipelineTrigger) bool { return tr.Status.Running == 1 })
}

// TestAHealthGateHoldsTheStartsAndItsDeadlineStopsTheTrigger: a gate over ConfigMaps is
// read as the trigger's ServiceAccount (which may not list them at first: the gate does
// not hold, and says so); while it does not hold nothing starts, and the trigger says
// which gate and why; past its deadline the trigger stops until a person resumes it.
func TestAHealthGateHoldsTheStartsAndItsDeadlineStopsTheTrigger(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns, sa := oneNodeToRetire(t, heldTemplate)
	client := stepwiseClient(t)
	health := healthConfigMap(t, ns, "false")
	trig := nodeTrigger(ns, sa, 1)
	trig.Spec.Gates = []v1alpha1.HealthGate{{Name: "fleet-healthy", Deadline: &metav1.Duration{Duration: 25 * time.Second},
		Objects: &v1alpha1.ObjectsGate{Resource: v1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"},
			Selector:  &v1alpha1.LabelSelector{MatchLabels: map[string]string{"stepwise.test/health": "fleet"}},
			Condition: "objects.size() > 0 && objects.all(c, c.data.healthy == 'true')"}}}
	_, err := client.StepwiseV1alpha1().PipelineTriggers(ns).Create(ctx, trig, metav1.CreateOptions{})
	require.NoError(t, err)

	forbidden := waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return readyReason(tr) == "True/"+v1alpha1.TriggerReasonGateClosed
	})
	assert.Contains(t, forbidden.Status.Conditions[0].Message, "gate fleet-healthy does not hold since")
	assert.Contains(t, forbidden.Status.Conditions[0].Message, "list configmaps as ServiceAccount "+sa)
	cluster.GrantClusterWide(t, ns, sa, "list-configmaps-"+ns,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}})
	closed := waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return len(tr.Status.Gates) == 1 && tr.Status.Gates[0].Message == "the condition is false over 1 configmaps"
	})
	assert.False(t, closed.Status.Gates[0].Holds)
	stopped := waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return readyReason(tr) == "False/"+v1alpha1.TriggerReasonGateDeadlineExceeded
	})
	require.NotNil(t, stopped.Status.GateStop)
	assert.Equal(t, "fleet-healthy", stopped.Status.GateStop.Gate)
	assert.Empty(t, triggerPipelines(t, ns, "retire"), "nothing started while the gate did not hold")

	health.Data["healthy"] = "true"
	_, err = cluster.Client.CoreV1().ConfigMaps(ns).Update(ctx, health, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = pipelineops.ResumeTrigger(ctx, cluster.Client, client, ns, "retire", time.Now())
	require.NoError(t, err)
	waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return tr.Status.Running == 1 && tr.Status.GateStop == nil
	})
}

// healthConfigMap is the ConfigMap a gate reads, labelled stepwise.test/health=fleet.
func healthConfigMap(t *testing.T, ns, healthy string) *corev1.ConfigMap {
	t.Helper()
	cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "health", Labels: map[string]string{"stepwise.test/health": "fleet"}},
		Data:       map[string]string{"healthy": healthy},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return cm
}

// TestAPrometheusGateHoldsTheStartsWhileAnAlertFires: a query answering a firing alert
// holds the starts, naming the alert; once it answers nothing the pipeline starts. The
// Prometheus is a loopback stand-in of its HTTP API, which the e2e operator's
// --gate-allowed-cidrs allows; it is asked the query limited to the trigger's namespace.
func TestAPrometheusGateHoldsTheStartsWhileAnAlertFires(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var firing atomic.Bool
	firing.Store(true)
	ns, sa := oneNodeToRetire(t, heldTemplate)
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		result := "[]"
		if firing.Load() && r.FormValue("query") == `ALERTS{alertname="NodeDown",alertstate="firing",namespace="`+ns+`"}` {
			result = `[{"metric":{"__name__":"ALERTS","alertname":"NodeDown","alertstate":"firing"},"value":[1700000000,"1"]}]`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":%s}}`, result)
	}))
	t.Cleanup(prom.Close)
	client := stepwiseClient(t)
	trig := nodeTrigger(ns, sa, 1)
	trig.Spec.Gates = []v1alpha1.HealthGate{{Name: "no-node-down", Prometheus: &v1alpha1.PrometheusGate{
		URL: prom.URL, Query: `ALERTS{alertname="NodeDown",alertstate="firing"}`}}}
	_, err := client.StepwiseV1alpha1().PipelineTriggers(ns).Create(ctx, trig, metav1.CreateOptions{})
	require.NoError(t, err)
	closed := waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return readyReason(tr) == "True/"+v1alpha1.TriggerReasonGateClosed
	})
	assert.Contains(t, closed.Status.Conditions[0].Message, `gate no-node-down does not hold since`)
	assert.Contains(t, closed.Status.Conditions[0].Message, `the query returns 1 series, first ALERTS{alertname="NodeDown", alertstate="firing"}`)
	assert.Empty(t, triggerPipelines(t, ns, "retire"))

	firing.Store(false)
	waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return tr.Status.Running == 1 && len(tr.Status.Gates) == 1 && tr.Status.Gates[0].Holds
	})
}

// TestAPrometheusGateOutsideTheEgressPolicyNeverHolds: a query to an address the
// installer did not allow (the cloud's metadata address, link-local) is refused by the
// operator before it connects, and the trigger says how an admin allows a range, in a
// fixed text that tells nothing of the address.
func TestAPrometheusGateOutsideTheEgressPolicyNeverHolds(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns, sa := oneNodeToRetire(t, retireTemplate)
	client := stepwiseClient(t)
	trig := nodeTrigger(ns, sa, 1)
	trig.Spec.Gates = []v1alpha1.HealthGate{{Name: "no-alerts", Prometheus: &v1alpha1.PrometheusGate{
		URL: "http://169.254.169.254:9090", Query: "ALERTS"}}}
	_, err := client.StepwiseV1alpha1().PipelineTriggers(ns).Create(ctx, trig, metav1.CreateOptions{})
	require.NoError(t, err)
	closed := waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return readyReason(tr) == "True/"+v1alpha1.TriggerReasonGateClosed
	})
	assert.Contains(t, closed.Status.Conditions[0].Message, "gate no-alerts does not hold")
	assert.Contains(t, closed.Status.Conditions[0].Message, "refused: the address is not allowed")
	assert.Contains(t, closed.Status.Conditions[0].Message, "--gate-allowed-cidrs")
	assert.Empty(t, triggerPipelines(t, ns, "retire"))
}

// TestSlowGatesOfOneNamespaceDoNotHoldAnothersTriggers: three triggers whose Prometheus
// gate never answers hold a trigger worker each for the gates' bound (10 s) at every
// check; a trigger of another namespace still starts its pipeline at once, as a namespace
// holds at most its share of the trigger workers.
func TestSlowGatesOfOneNamespaceDoNotHoldAnothersTriggers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hang); slow.Close() })
	client := stepwiseClient(t)

	hostile := cluster.CreateNamespace(t)
	sa := triggerRetirer(t, hostile)
	_, err := client.StepwiseV1alpha1().PipelineTemplates(hostile).Create(ctx, heldTemplate(hostile), metav1.CreateOptions{})
	require.NoError(t, err)
	labelForRetirement(t, poolNode(t, hostile))
	for i := range 3 {
		trig := nodeTrigger(hostile, sa, 1)
		trig.Name = fmt.Sprintf("slow-%d", i)
		trig.Spec.Gates = []v1alpha1.HealthGate{{Name: "slow", Prometheus: &v1alpha1.PrometheusGate{URL: slow.URL, Query: "up"}}}
		_, err = client.StepwiseV1alpha1().PipelineTriggers(hostile).Create(ctx, trig, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	waitTrigger(t, hostile, "slow-0", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return readyReason(tr) == "True/"+v1alpha1.TriggerReasonGateClosed
	})

	ns := cluster.CreateNamespace(t)
	other := triggerRetirer(t, ns)
	_, err = client.StepwiseV1alpha1().PipelineTemplates(ns).Create(ctx, heldTemplate(ns), metav1.CreateOptions{})
	require.NoError(t, err)
	labelForRetirement(t, poolNode(t, ns))
	created := time.Now()
	_, err = client.StepwiseV1alpha1().PipelineTriggers(ns).Create(ctx, nodeTrigger(ns, other, 1), metav1.CreateOptions{})
	require.NoError(t, err)
	waitTrigger(t, ns, "retire", 30*time.Second, func(tr *v1alpha1.PipelineTrigger) bool { return tr.Status.Running == 1 })
	took := time.Since(created)
	t.Logf("the other namespace's trigger started its pipeline %s after it was created", took.Round(time.Millisecond))
	assert.Less(t, took, 5*time.Second, "not held behind the slow gates (10 s each)")
}

// oneNodeToRetire makes a namespace with the ServiceAccount "retirer" (triggerRetirer),
// the template, and one kwok node of its pool labelled for retirement; it returns the
// namespace and the ServiceAccount.
func oneNodeToRetire(t *testing.T, template func(ns string) *v1alpha1.PipelineTemplate) (string, string) {
	t.Helper()
	ns := cluster.CreateNamespace(t)
	sa := triggerRetirer(t, ns)
	_, err := stepwiseClient(t).StepwiseV1alpha1().PipelineTemplates(ns).Create(t.Context(), template(ns), metav1.CreateOptions{})
	require.NoError(t, err)
	labelForRetirement(t, poolNode(t, ns))
	return ns, sa
}
