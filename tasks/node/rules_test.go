package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	listers "github.com/stepwise-dev/stepwise/pkg/generated/listers/stepwise/v1alpha1"
)

func TestParseDrainRulesRefusesWhatItCannotUse(t *testing.T) {
	tests := []struct {
		name, rules, want string
	}{
		{"not a list", "behavior: Drain", "is not a list of drain rules"},
		{"an unknown field", "- {behaviour: Drain}", "is not a list of drain rules"},
		{"an unknown behavior", "- {behavior: Later}", `rule rules[0]: behavior is "Later", not Drain, Skip or WaitCompleted`},
		{"an order without Drain", "- {name: cache, behavior: Skip, order: 3}", "rule cache: an order goes with behavior Drain only"},
		{"a selector that does not parse", "- {behavior: Drain, podSelector: {matchExpressions: [{key: app, operator: Maybe}]}}", "rule rules[0]: podSelector"},
		{"In without values", "- {behavior: Drain, podSelector: {matchExpressions: [{key: app, operator: In}]}}", "rule rules[0]: podSelector"},
		{"a label key that is none", "- {behavior: Drain, nodeSelector: {matchLabels: {'a b': x}}}", "rule rules[0]: nodeSelector"},
		{"more rules than the bound", strings.Repeat("- {behavior: Drain}\n", maxDrainRules+1), "has 33 rules, more than 32"},
		{"aliases that amplify", "- &r {behavior: Drain}\n" + strings.Repeat("- *r\n", maxDrainRules), "has 33 rules, more than 32"},
		{"billion laughs", "l0: &l0 [a]\nl1: &l1 [*l0,*l0,*l0,*l0,*l0,*l0,*l0,*l0,*l0]\nl2: &l2 [*l1,*l1,*l1,*l1,*l1,*l1,*l1,*l1,*l1]\nr: [*l2,*l2,*l2,*l2,*l2,*l2,*l2,*l2,*l2]",
			"is not a list of drain rules"},
		{"deep nesting", strings.Repeat("[", 10000) + strings.Repeat("]", 10000), "is not a list of drain rules"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseDrainRules(tt.rules)
			require.Error(t, err)
			assert.Equal(t, contract.ReasonInvalidParameter, executor.ReasonFor(err))
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestFateOfAPod(t *testing.T) {
	rules, err := parseDrainRules(`
- {name: cache, podSelector: {matchLabels: {app: cache}}, behavior: Skip}
- {name: jobs, namespaces: [batch], behavior: WaitCompleted}
- {name: ceph-last, podSelector: {matchLabels: {app: ceph-osd}}, nodeSelector: {matchLabels: {storage: "true"}}, behavior: Drain, order: 10}
- {name: everything-cache, podSelector: {matchLabels: {app: cache}}, behavior: Drain}
`)
	require.NoError(t, err)
	storage := newNode("n1", true, nil)
	storage.Labels = map[string]string{"storage": "true"}
	plain := newNode("n1", true, nil)
	pod := func(ns string, labels map[string]string) *corev1.Pod {
		p := runningPod(ns, "p", "ReplicaSet", labels)
		return p
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		node *corev1.Node
		want podFate
	}{
		{"no rule: drained first", pod("apps", map[string]string{"app": "web"}), storage, podFate{behavior: BehaviorDrain}},
		{"the first rule that selects it", pod("apps", map[string]string{"app": "cache"}), storage, podFate{behavior: BehaviorSkip, by: "drain rule cache"}},
		{"by namespace", pod("batch", nil), storage, podFate{behavior: BehaviorWaitCompleted, by: "drain rule jobs"}},
		{"by node labels", pod("rook", map[string]string{"app": "ceph-osd"}), storage, podFate{behavior: BehaviorDrain, order: 10, by: "drain rule ceph-last"}},
		{"not on that node", pod("rook", map[string]string{"app": "ceph-osd"}), plain, podFate{behavior: BehaviorDrain}},
		{"the skip label over every rule", pod("rook", map[string]string{"app": "ceph-osd", v1alpha1.DrainLabel: v1alpha1.DrainSkip}), storage,
			podFate{behavior: BehaviorSkip, by: "label stepwise.dev/drain=skip"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, fateOf(tt.pod, tt.node, rules))
		})
	}
}

// TestDrainFollowsItsRules: a pod the rules leave stays, one they wait for is not evicted,
// and a pod of a higher order is evicted only once those of lower orders are gone.
func TestDrainFollowsItsRules(t *testing.T) {
	ctx := context.Background()
	web, osd := webPod("web-1"), runningPod("rook", "osd-0", "ReplicaSet", map[string]string{"app": "ceph-osd"})
	cache := runningPod("apps", "cache-0", "ReplicaSet", map[string]string{"app": "cache"})
	job := runningPod("batch", "job-0", "Job", nil)
	client := fake.NewClientset(newNode("n1", true, nil), web, osd, cache, job)
	readsEverything(client)
	evicted := evictions(client, nil)
	d := Drain{}
	req := request(t, d, client, map[string]string{"node": "n1", "replacement": "None", "rules": `
- {name: cache, podSelector: {matchLabels: {app: cache}}, behavior: Skip}
- {name: jobs, namespaces: [batch], behavior: WaitCompleted}
- {name: ceph-last, podSelector: {matchLabels: {app: ceph-osd}}, behavior: Drain, order: 10}
`})

	res, err := call(t, d, req)
	require.NoError(t, err)
	assert.Equal(t, []string{"web-1"}, *evicted, "order 0 first")
	assert.Contains(t, res.Message, "rook/osd-0: evicted after the pods of order 0 (drain rule ceph-last, order 10)")
	assert.Contains(t, res.Message, "batch/job-0: waits for it to complete (drain rule jobs)")
	assert.Contains(t, res.Message, "1 pod left on the node by the drain's rules")

	// web-1 gone: the OSD goes next; the job still runs.
	require.NoError(t, client.CoreV1().Pods("apps").Delete(ctx, "web-1", metav1.DeleteOptions{}))
	_, err = call(t, d, req)
	require.NoError(t, err)
	assert.Equal(t, []string{"web-1", "osd-0"}, *evicted)

	// The OSD gone and the job completed: drained, the cache still there.
	require.NoError(t, client.CoreV1().Pods("rook").Delete(ctx, "osd-0", metav1.DeleteOptions{}))
	job.Status.Phase = corev1.PodSucceeded
	_, err = client.CoreV1().Pods("batch").UpdateStatus(ctx, job, metav1.UpdateOptions{})
	require.NoError(t, err)
	res, err = call(t, d, req)
	require.NoError(t, err)
	assert.True(t, res.Done, res.Message)
	assert.Equal(t, []string{"web-1", "osd-0"}, *evicted, "neither the cache nor the job was evicted")
	assert.Equal(t, "node drained, 2 pods evicted; 2 pods left on the node by the drain's rules", res.Message)
}

// TestDrainPlanFollowsTheRules: the plan lists each pod's fate in the rules' order (order 0,
// by name, then the higher orders), with the rule that decided it.
func TestDrainPlanFollowsTheRules(t *testing.T) {
	client := fake.NewClientset(newNode("n1", true, nil), webPod("web-1"),
		runningPod("rook", "osd-0", "ReplicaSet", map[string]string{"app": "ceph-osd"}),
		runningPod("apps", "cache-0", "ReplicaSet", map[string]string{"app": "cache"}),
		runningPod("batch", "job-0", "Job", nil))
	readsEverything(client)
	d := Drain{}
	plan, err := d.Plan(context.Background(), request(t, d, client, map[string]string{"node": "n1", "replacement": "None", "rules": `
- {name: cache, podSelector: {matchLabels: {app: cache}}, behavior: Skip}
- {name: jobs, namespaces: [batch], behavior: WaitCompleted}
- {name: ceph-last, podSelector: {matchLabels: {app: ceph-osd}}, behavior: Drain, order: 10}
`}))
	require.NoError(t, err)
	assertReadOnly(t, client)
	var rows []string
	for _, r := range plan.Details {
		if r.Kind == "Pod" {
			rows = append(rows, r.Action+" "+r.Name+": "+r.Note)
		}
	}
	assert.Equal(t, []string{
		"skip apps/cache-0: left by drain rule cache",
		"evict apps/web-1: ",
		"wait batch/job-0: until it completes (drain rule jobs)",
		"evict rook/osd-0: order 10 (drain rule ceph-last)",
	}, rows)
}

// clusterRules are DrainRules as the operator's lister has them; synced says whether it
// has read them.
func clusterRules(t *testing.T, synced bool, rules ...*v1alpha1.DrainRule) *DrainRules {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, r := range rules {
		require.NoError(t, indexer.Add(r))
	}
	return &DrainRules{Lister: listers.NewDrainRuleLister(indexer), Synced: func() bool { return synced }}
}

// TestTheClustersDrainRulesComeBeforeTheSteps: a DrainRule an admin wrote decides a pod
// before the step's rules do, and a drain does not start before the operator has read them.
func TestTheClustersDrainRulesComeBeforeTheSteps(t *testing.T) {
	cacheRule := &v1alpha1.DrainRule{ObjectMeta: metav1.ObjectMeta{Name: "node-local-cache"}, Spec: v1alpha1.DrainRuleSpec{
		Behavior: v1alpha1.DrainBehaviorSkip, PodSelector: &v1alpha1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}}}}
	stepRules := map[string]string{"node": "n1", "timeout": "1m", "replacement": "None",
		"rules": "- {name: all, behavior: Drain, order: 5}"}

	client := fake.NewClientset(newNode("n1", true, nil), runningPod("apps", "cache-0", "ReplicaSet", map[string]string{"app": "cache"}), webPod("web-1"))
	readsEverything(client)
	evicted := evictions(client, nil)
	d := Drain{Rules: clusterRules(t, true, cacheRule)}
	res, err := d.Create(context.Background(), request(t, d, client, stepRules))
	require.NoError(t, err)
	assert.Equal(t, []string{"web-1"}, *evicted, "the cache stays, as the DrainRule says, whatever the step's rule")
	assert.Contains(t, res.Message, "1 pod left on the node by the drain's rules")
	plan, err := d.Plan(context.Background(), request(t, d, client, stepRules))
	require.NoError(t, err)
	assert.Contains(t, plan.Details, contract.PlanItem{Kind: "Pod", Name: "apps/cache-0", Action: "skip", Note: "left by DrainRule node-local-cache"})

	// Not read yet: the drain waits, and says why; past its timeout it fails.
	clock := testingclock.NewFakeClock(time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC))
	unread := Drain{Clock: clock, Rules: clusterRules(t, false)}
	req := request(t, unread, client, stepRules)
	req.HookStarted = clock.Now()
	res, err = unread.Create(context.Background(), req)
	require.NoError(t, err)
	assert.False(t, res.Done)
	assert.Contains(t, res.Message, "the operator has not read the cluster's DrainRules yet")
	assert.Equal(t, []string{"web-1"}, *evicted, "nothing evicted before the rules are read")
	clock.Step(2 * time.Minute)
	_, err = unread.Create(context.Background(), req)
	require.Error(t, err)
	assert.Equal(t, "DrainTimeout", executor.ReasonFor(err))
}
