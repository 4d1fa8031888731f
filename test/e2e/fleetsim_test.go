package e2e

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops"
	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

var (
	fleetNodes = flag.Int("fleet.nodes", 40, "nodes of the fleet simulation (make chaos runs 200)")
	fleetSeed  = flag.Uint64("fleet.seed", 0, "seed of the fleet simulation's random choices; 0 picks one (logged)")
)

// The fleet simulation's settings: the issue's, but for the node count.
const (
	fleetPools         = 4
	fleetBudget        = 5
	fleetFailureRate   = 0.10
	fleetNotReady      = 2 // nodes that turn NotReady on their own
	fleetFailureBudget = 2
	fleetConcurrency   = 3 // per trigger: four of them could take 12 nodes, the budget gives 5
	fleetGateClosedFor = 12 * time.Second
	// fleetStartGrace is how long after a gate closed, or a trigger was seen stopped, a
	// start may still appear: one decided on the state just before.
	fleetStartGrace = 2 * time.Second
)

// fleetTemplate retires a node: cordon, a step that fails when the node is labelled
// sim-fail=permanent (and not when sim-fail is empty), delete; a failure uncordons it
// (onFailure Teardown).
func fleetTemplate(ns string) *v1alpha1.PipelineTemplate {
	node := map[string]string{"node": "$(params.node)"}
	return &v1alpha1.PipelineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "retire-node", Namespace: ns},
		Spec: v1alpha1.PipelineTemplateSpec{
			Params:    []v1alpha1.TemplateParam{{Name: "node", Required: true}, {Name: "fail"}},
			OnFailure: v1alpha1.FailureTeardown,
			Steps: []v1alpha1.Step{
				{Name: "cordon", Executor: "node.cordon", With: node},
				recordStep("check", map[string]string{"fail": "$(params.fail)"}),
				{Name: "forget", Executor: "node.delete", With: node},
			},
		},
	}
}

// fleetTrigger retires the pool's nodes, under the shared budget and the health gate.
func fleetTrigger(ns, pool, sa, budget string) *v1alpha1.PipelineTrigger {
	return &v1alpha1.PipelineTrigger{
		ObjectMeta: metav1.ObjectMeta{Name: pool, Namespace: ns},
		Spec: v1alpha1.PipelineTriggerSpec{
			Resource:           v1alpha1.TriggerResource{APIVersion: "v1", Kind: "Node"},
			Selector:           &v1alpha1.LabelSelector{MatchLabels: map[string]string{"sim": ns, "simpool": pool, "stepwise.dev/retire": "true"}},
			TemplateRef:        v1alpha1.TemplateRef{Name: "retire-node"},
			Params:             map[string]string{"node": "$(object.metadata.name)", "fail": "$(object.metadata.labels['sim-fail'])"},
			ServiceAccountName: sa,
			Concurrency:        fleetConcurrency,
			FailureBudget:      fleetFailureBudget,
			TaintWaiting:       true,
			HistoryLimit:       1000, // every pipeline stays, as the simulation's record
			NodeBudgetRef:      &v1alpha1.NodeBudgetRef{Name: budget},
			Gates: []v1alpha1.HealthGate{{Name: "fleet-healthy", Objects: &v1alpha1.ObjectsGate{
				Resource:  v1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"},
				Selector:  &v1alpha1.LabelSelector{MatchLabels: map[string]string{"stepwise.test/health": "fleet"}},
				Condition: "objects.size() > 0 && objects.all(c, c.data.healthy == 'true')",
			}}},
		},
	}
}

// fleetObservation is what the observer saw.
type fleetObservation struct {
	mu sync.Mutex
	// maxUnavailable is the most nodes unavailable at once: NotReady, cordoned, or with an
	// unfinished pipeline; peak names them, with why, as first seen at that count.
	maxUnavailable int
	peak           []string
	// maxStarted is the most unavailable at once leaving out the nodes the chaos turned
	// NotReady that no pipeline was retiring: a node failing on its own while the budget
	// is full makes one more than the budget, which no start decided; the starts' own
	// count must still never pass it.
	maxStarted int
	// notReady are the nodes the chaos turned NotReady.
	notReady map[string]bool
	// created is when each pipeline was created, by name.
	created map[string]time.Time
	// stoppedAt is when each trigger was first seen stopped by its failure budget, since
	// its last resume; resumedAt when the simulation resumed it.
	stoppedAt, resumedAt map[string]time.Time
	pauses               int
	lastLog              time.Time
	// startsWhileStopped and startsWhileGateClosed name the pipelines created then.
	startsWhileStopped, startsWhileGateClosed []string
}

// TestFleetSimulation: the fleet, on kwok nodes: four pools, four triggers sharing
// one NodeBudget of 5, 10 % of retirements failing, nodes turning NotReady on their own, a
// health gate closed for a while, failure budgets of 2 resumed by "a person" when spent.
func TestFleetSimulation(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	begin := time.Now()
	seed := *fleetSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("fleet simulation: %d nodes, seed %d (-fleet.seed=%d repeats its choices)", *fleetNodes, seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	ns := cluster.CreateNamespace(t)
	sa := fleetRetirer(t, ns)
	serviceAccountRules(t, ns, sa)
	budget := "sim-" + ns
	client := stepwiseClient(t)
	_, err := client.StepwiseV1alpha1().NodeBudgets().Create(ctx, &v1alpha1.NodeBudget{
		ObjectMeta: metav1.ObjectMeta{Name: budget},
		Spec: v1alpha1.NodeBudgetSpec{MaxUnavailable: fleetBudget,
			NodeSelector: &v1alpha1.LabelSelector{MatchLabels: map[string]string{"sim": ns}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = client.StepwiseV1alpha1().NodeBudgets().Delete(context.Background(), budget, metav1.DeleteOptions{})
	})
	mayUseBudget(t, ns, sa, budget)
	healthConfigMap(t, ns, "true")
	_, err = client.StepwiseV1alpha1().PipelineTemplates(ns).Create(ctx, fleetTemplate(ns), metav1.CreateOptions{})
	require.NoError(t, err)

	nodes, failing := fleetOfNodes(t, ns, rng)
	setup := time.Since(begin)
	for p := range fleetPools {
		_, err := client.StepwiseV1alpha1().PipelineTriggers(ns).Create(ctx, fleetTrigger(ns, fmt.Sprintf("p%d", p), sa, budget), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	run := time.Now()

	obs := &fleetObservation{created: map[string]time.Time{}, stoppedAt: map[string]time.Time{}, resumedAt: map[string]time.Time{}, notReady: map[string]bool{}}
	var gateMu sync.Mutex
	var gateClosed, gateOpened time.Time
	observe := func(ctx context.Context) (bool, error) {
		nodeList, err := cluster.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "sim=" + ns})
		if err != nil {
			return false, nil
		}
		pipelines, err := client.StepwiseV1alpha1().Pipelines(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		triggers, err := client.StepwiseV1alpha1().PipelineTriggers(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		now := time.Now()
		// The nodes were listed first: one whose pipeline has finished since may still
		// show the cordon of its retirement, which is over (the node is gone, or was
		// uncordoned).
		finished := map[string]bool{}
		for _, p := range pipelines.Items {
			if p.Finished() {
				finished[p.Annotations[v1alpha1.AnnotationObject]] = true
			}
		}
		unavailable := map[string]string{}
		for _, n := range nodeList.Items {
			switch {
			case finished[n.Name]:
			case !nodeIsReady(&n):
				unavailable[n.Name] = "NotReady"
			case n.Spec.Unschedulable:
				unavailable[n.Name] = "cordoned"
			}
		}
		unfinished := 0
		gateMu.Lock()
		closed, opened := gateClosed, gateOpened
		gateMu.Unlock()
		obs.mu.Lock()
		defer obs.mu.Unlock()
		for _, p := range pipelines.Items {
			if !p.Finished() {
				unfinished++
				unavailable[p.Annotations[v1alpha1.AnnotationObject]] = "retiring"
			}
			if _, seen := obs.created[p.Name]; seen {
				continue
			}
			obs.created[p.Name] = now
			trig := p.Labels[v1alpha1.LabelTrigger]
			// Its creation time, not when this poll first saw it: a poll slowed by a loaded
			// machine sees a pipeline created before the stop later than the stop (a CI
			// run failed on it).
			if stopped, ok := obs.stoppedAt[trig]; ok && p.CreationTimestamp.After(stopped.Add(fleetStartGrace)) && obs.resumedAt[trig].Before(stopped) {
				obs.startsWhileStopped = append(obs.startsWhileStopped, p.Name)
			}
			if !closed.IsZero() && p.CreationTimestamp.After(closed.Add(fleetStartGrace)) && (opened.IsZero() || p.CreationTimestamp.Time.Before(opened.Add(-time.Second))) {
				obs.startsWhileGateClosed = append(obs.startsWhileGateClosed, p.Name)
			}
		}
		if len(unavailable) > obs.maxUnavailable {
			obs.maxUnavailable = len(unavailable)
			obs.peak = obs.peak[:0]
			for _, node := range slices.Sorted(maps.Keys(unavailable)) {
				obs.peak = append(obs.peak, node+" ("+unavailable[node]+")")
			}
		}
		started := len(unavailable)
		for node, why := range unavailable {
			if why == "NotReady" && obs.notReady[node] {
				started--
			}
		}
		obs.maxStarted = max(obs.maxStarted, started)
		done := true
		for _, tr := range triggers.Items {
			// A status older than the spec may still say stopped after a resume.
			if c := meta.FindStatusCondition(tr.Status.Conditions, v1alpha1.ConditionReady); c != nil &&
				c.Reason == v1alpha1.TriggerReasonFailureBudgetSpent && tr.Status.ObservedGeneration == tr.Generation {
				if _, ok := obs.stoppedAt[tr.Name]; !ok || obs.resumedAt[tr.Name].After(obs.stoppedAt[tr.Name]) {
					obs.stoppedAt[tr.Name] = now
					obs.pauses++
				}
				done = false
				continue
			}
			if tr.Status.Waiting > 0 || tr.Status.Running > 0 || tr.Status.ObservedGeneration != tr.Generation {
				done = false
			}
		}
		if now.Sub(obs.lastLog) > 15*time.Second {
			obs.lastLog = now
			reasons := map[string]string{}
			for _, tr := range triggers.Items {
				if c := meta.FindStatusCondition(tr.Status.Conditions, v1alpha1.ConditionReady); c != nil {
					reasons[tr.Name] = c.Reason
				}
			}
			t.Logf("fleet simulation: %d pipelines, %d unfinished, %d nodes, %d unavailable; triggers %v",
				len(pipelines.Items), unfinished, len(nodeList.Items), len(unavailable), reasons)
		}
		return done && unfinished == 0 && len(pipelines.Items) == len(nodes), nil
	}

	// A person: resumes a trigger stopped by its failure budget once its pipelines are
	// done, a little later; and the chaos: the gate closes for a while, nodes turn NotReady.
	var chaos errgroup.Group
	chaosCtx, stopChaos := context.WithCancel(ctx)
	defer stopChaos()
	chaos.Go(func() error {
		// It ends when the simulation does (context canceled): that is no error.
		_ = wait.PollUntilContextCancel(chaosCtx, time.Second, false, func(ctx context.Context) (bool, error) {
			obs.mu.Lock()
			var due []string
			for trig, at := range obs.stoppedAt {
				if obs.resumedAt[trig].Before(at) && time.Since(at) > 3*time.Second {
					due = append(due, trig)
				}
			}
			obs.mu.Unlock()
			for _, trig := range due {
				if _, err := pipelineops.ResumeTrigger(ctx, cluster.Client, client, ns, trig, time.Now()); err != nil {
					t.Logf("resume %s: %v", trig, err)
					continue
				}
				obs.mu.Lock()
				obs.resumedAt[trig] = time.Now()
				obs.mu.Unlock()
			}
			return false, nil
		})
		return nil
	})
	// started waits until the simulation has started a fraction of the fleet's pipelines.
	started := func(ctx context.Context, fraction float64) bool {
		return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
			obs.mu.Lock()
			defer obs.mu.Unlock()
			return float64(len(obs.created)) >= fraction*float64(len(nodes)), nil
		}) == nil
	}
	chaos.Go(func() error {
		if !started(chaosCtx, 0.3) {
			return nil
		}
		if err := setHealthy(chaosCtx, ns, false); err != nil {
			return fmt.Errorf("close the gate: %w", err)
		}
		gateMu.Lock()
		gateClosed = time.Now()
		gateMu.Unlock()
		select {
		case <-chaosCtx.Done():
			return nil
		case <-time.After(fleetGateClosedFor):
		}
		gateMu.Lock()
		gateOpened = time.Now()
		gateMu.Unlock()
		if err := setHealthy(chaosCtx, ns, true); err != nil {
			return fmt.Errorf("open the gate: %w", err)
		}
		return nil
	})
	chaos.Go(func() error {
		for i := range fleetNotReady {
			if !started(chaosCtx, 0.1+0.5*float64(i)/fleetNotReady) {
				return nil
			}
			node := nodes[rng.IntN(len(nodes))]
			obs.mu.Lock()
			obs.notReady[node] = true
			obs.mu.Unlock()
			if err := turnNotReady(chaosCtx, node); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("make node %s NotReady: %w", node, err)
			}
		}
		return nil
	})

	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 6*time.Minute, true, observe)
	stopChaos()
	require.NoError(t, chaos.Wait())
	require.NoError(t, err, "the fleet did not finish; operator log: %s", operator.Log)
	wall := time.Since(run)

	// What remains: the nodes whose retirement failed, uncordoned and untainted.
	left, err := cluster.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "sim=" + ns})
	require.NoError(t, err)
	var cordoned, tainted []string
	for _, n := range left.Items {
		if n.Spec.Unschedulable {
			cordoned = append(cordoned, n.Name)
		}
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == v1alpha1.TaintWaiting }) {
			tainted = append(tainted, n.Name)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	t.Logf("fleet simulation: %d nodes in %d pools, %d retired, %d failed (%d labelled to fail), max unavailable %d (budget %d; %d leaving out nodes failed on their own; at the peak: %v), "+
		"%d stops of a failure budget, %d starts while stopped, %d starts while the gate was closed, %d left cordoned, %d left tainted; setup %s, run %s",
		len(nodes), fleetPools, len(nodes)-len(left.Items), len(left.Items), len(failing), obs.maxUnavailable, fleetBudget, obs.maxStarted, obs.peak,
		obs.pauses, len(obs.startsWhileStopped), len(obs.startsWhileGateClosed), len(cordoned), len(tainted),
		setup.Round(time.Second), wall.Round(time.Second))
	assert.LessOrEqual(t, obs.maxStarted, fleetBudget, "never more nodes unavailable than the budget, but for nodes that failed on their own: %v", obs.peak)
	assert.LessOrEqual(t, obs.maxUnavailable, fleetBudget+fleetNotReady, "a node failing on its own makes at most one more: %v", obs.peak)
	assert.Empty(t, obs.startsWhileStopped, "nothing starts while a trigger's failure budget is spent")
	assert.Empty(t, obs.startsWhileGateClosed, "nothing starts while the gate does not hold")
	assert.Empty(t, cordoned, "no node left cordoned")
	assert.Empty(t, tainted, "no node left tainted")
	assert.ElementsMatch(t, failing, nodeNames(left.Items), "only the nodes whose retirement fails remain")
	if slices.ContainsFunc(poolFailures(failing, nodes), func(n int) bool { return n >= fleetFailureBudget }) {
		assert.Positive(t, obs.pauses, "a pool with %d failures stops its trigger", fleetFailureBudget)
	}
}

// setHealthy sets the fleet's health, which the simulation's gate reads.
func setHealthy(ctx context.Context, ns string, healthy bool) error {
	patch := fmt.Sprintf(`{"data":{"healthy":"%t"}}`, healthy)
	_, err := cluster.Client.CoreV1().ConfigMaps(ns).Patch(ctx, "health", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// serviceAccountRules lets the simulation's ServiceAccount record (test.record), taint
// waiting nodes and read the gate's ConfigMaps.
func serviceAccountRules(t *testing.T, ns, sa string) {
	t.Helper()
	cluster.GrantClusterWide(t, ns, sa, "fleet-sim-"+ns,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"patch"}})
}

// fleetOfNodes makes the simulation's kwok nodes, in parallel, labelled with their pool,
// for retirement, and sim-fail=permanent for about fleetFailureRate of them. It returns
// their names and those of the failing ones.
func fleetOfNodes(t *testing.T, ns string, rng *rand.Rand) ([]string, []string) {
	t.Helper()
	ctx := t.Context()
	names := make([]string, *fleetNodes)
	fail := make([]bool, *fleetNodes)
	var failing []string
	for i := range names {
		names[i] = fmt.Sprintf("%s-%03d", ns, i)
		if rng.Float64() < fleetFailureRate {
			fail[i] = true
			failing = append(failing, names[i])
		}
	}
	t.Cleanup(func() {
		for _, name := range names {
			_ = cluster.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	var g errgroup.Group
	g.SetLimit(16)
	for i, name := range names {
		g.Go(func() error {
			if _, err := cluster.CreateFakeNode(ctx, name); err != nil {
				return err
			}
			failure := "" // an empty parameter is not set: the step succeeds
			if fail[i] {
				failure = "permanent"
			}
			patch := fmt.Sprintf(`{"metadata":{"labels":{"sim":%q,"simpool":"p%d","sim-fail":%q,"stepwise.dev/retire":"true"}}}`,
				ns, i%fleetPools, failure)
			_, err := cluster.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		})
	}
	require.NoError(t, g.Wait())
	return names, failing
}

// turnNotReady makes a kwok node NotReady, as a node whose kubelet stopped: kwok lets go
// of it (else it would report it Ready again) and its Ready condition turns Unknown.
func turnNotReady(ctx context.Context, name string) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, framework.KwokNodeAnnotation)
	if _, err := cluster.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return err
	}
	// The operator (a cordon, a taint) and kwok write the Node too: read it again on a
	// conflict.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cluster.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i].Status = corev1.ConditionUnknown
				n.Status.Conditions[i].Reason = "NodeStatusUnknown"
			}
		}
		_, err = cluster.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

func nodeIsReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func nodeNames(nodes []corev1.Node) []string {
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	return names
}

// poolFailures counts the failing nodes of each pool.
func poolFailures(failing, nodes []string) []int {
	counts := make([]int, fleetPools)
	for i, n := range nodes {
		if slices.Contains(failing, n) {
			counts[i%fleetPools]++
		}
	}
	return counts
}
