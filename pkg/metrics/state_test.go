package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	listers "github.com/stepwise-dev/stepwise/pkg/generated/listers/stepwise/v1alpha1"
)

// The state metrics count what the caches hold at the scrape, with labels from bounded
// sets: an executor no one offers is "unknown", a blocker kind an executor made up is
// "Other", and no pipeline's name is a label.
func TestStateMetricsCountTheCache(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-d)} }
	pipes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	trigs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	add := func(idx cache.Indexer, obj any) { require.NoError(t, idx.Add(obj)) }
	pipeline := func(ns, name string, phase v1alpha1.PipelinePhase, steps []v1alpha1.StepStatus, blockers ...v1alpha1.Blocker) *v1alpha1.Pipeline {
		return &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Status: v1alpha1.PipelineStatus{Phase: phase, Steps: steps, BlockedBy: blockers}}
	}
	drain := []v1alpha1.StepStatus{{Name: "cordon", Executor: "node.cordon", Phase: v1alpha1.StepSucceeded}, {Name: "drain", Executor: "node.drain", Phase: v1alpha1.StepRunning}}
	add(pipes, pipeline("ops", "a", v1alpha1.PipelineRunning, drain,
		v1alpha1.Blocker{Kind: v1alpha1.KindPodDisruptionBudget, Namespace: "apps", Name: "web", Since: ago(10 * time.Minute)},
		v1alpha1.Blocker{Kind: v1alpha1.KindPodDisruptionBudget, Namespace: "apps", Name: "db", Since: ago(time.Minute)}))
	add(pipes, pipeline("ops", "b", v1alpha1.PipelineRunning, drain,
		v1alpha1.Blocker{Kind: v1alpha1.KindPodDisruptionBudget, Namespace: "apps", Name: "web", Since: ago(30 * time.Minute)}))
	add(pipes, pipeline("ops", "c", v1alpha1.PipelineSucceeded, []v1alpha1.StepStatus{{Name: "x", Executor: "made.up", Phase: v1alpha1.StepSucceeded}}))
	add(pipes, pipeline("team", "d", "", []v1alpha1.StepStatus{{Name: "x", Executor: "node.cordon"}},
		v1alpha1.Blocker{Kind: "Invented", Since: ago(time.Hour)}))
	add(trigs, &v1alpha1.PipelineTrigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "retire"}, Status: v1alpha1.PipelineTriggerStatus{
		Matched: 5, Running: 2, Waiting: 3, FailureBudgetLeft: 1,
		BlockedBy: []v1alpha1.Blocker{{Kind: v1alpha1.BlockerPaused, Name: "alice", Since: ago(2 * time.Minute)}},
	}})

	reg := prometheus.NewRegistry()
	NewState(reg, StateSource{
		Pipelines: listers.NewPipelineLister(pipes), Triggers: listers.NewPipelineTriggerLister(trigs),
		KnownExecutor: func(name string) bool { return strings.HasPrefix(name, "node.") },
		Now:           func() time.Time { return now },
	})
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP stepwise_pipelines Pipelines by namespace and phase (Pending, Running, Succeeded, Failed, Suspended, Deleting, Planned), from the leader's cache at each scrape; the cache leaves out resting pipelines (status.resting), so finished ones count until they rest.
# TYPE stepwise_pipelines gauge
stepwise_pipelines{namespace="ops",phase="Running"} 2
stepwise_pipelines{namespace="ops",phase="Succeeded"} 1
stepwise_pipelines{namespace="team",phase="Pending"} 1
# HELP stepwise_steps Steps of all pipelines by executor and phase; an executor no one offers counts as "unknown".
# TYPE stepwise_steps gauge
stepwise_steps{executor="node.cordon",phase="Pending"} 1
stepwise_steps{executor="node.cordon",phase="Succeeded"} 2
stepwise_steps{executor="node.drain",phase="Running"} 2
stepwise_steps{executor="unknown",phase="Succeeded"} 1
`), PipelinesName, StepsName))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP stepwise_pipelines_blocked Pipelines held back, by namespace and the kind of what holds them (status.blockedBy: PodDisruptionBudget, Approval, StepFailed, Retry, Teardown, Suspended, PipelineTemplate; Other for a kind an executor names).
# TYPE stepwise_pipelines_blocked gauge
stepwise_pipelines_blocked{kind="Other",namespace="team"} 1
stepwise_pipelines_blocked{kind="PodDisruptionBudget",namespace="ops"} 2
# HELP stepwise_pipelines_blocked_seconds_max How long the longest-held pipeline of the namespace has been held back by that kind of thing, in seconds.
# TYPE stepwise_pipelines_blocked_seconds_max gauge
stepwise_pipelines_blocked_seconds_max{kind="Other",namespace="team"} 3600
stepwise_pipelines_blocked_seconds_max{kind="PodDisruptionBudget",namespace="ops"} 1800
`), PipelinesBlockedName, BlockedSecondsName))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP stepwise_trigger_failure_budget_left Failures a trigger may still have before it starts nothing new.
# TYPE stepwise_trigger_failure_budget_left gauge
stepwise_trigger_failure_budget_left{namespace="ops",trigger="retire"} 1
# HELP stepwise_trigger_blocked_seconds How long a trigger has been kept from starting pipelines, by the kind of what keeps it (Paused, FailureBudget, Gate, NodeBudget, MaintenanceWindow, CoolDown, Concurrency, PodDisruptionBudget, Suspended, PipelineTemplate), in seconds; absent when nothing does.
# TYPE stepwise_trigger_blocked_seconds gauge
stepwise_trigger_blocked_seconds{kind="Paused",namespace="ops",trigger="retire"} 120
`), TriggerBudgetLeftName, TriggerBlockedName))
	require.Equal(t, 6, testutil.CollectAndCount(reg, TriggerObjectsName), "one series per state")
}

// Every metric is defined once, with a help text and a kind, and a name Prometheus takes.
func TestDefinitionsAreComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range Definitions() {
		require.False(t, seen[d.Name], "%s defined twice", d.Name)
		seen[d.Name] = true
		require.NotEmpty(t, d.Help, d.Name)
		require.Contains(t, []Kind{Counter, Gauge, Histogram}, d.Kind, d.Name)
		require.Regexp(t, `^[a-z_][a-z0-9_]*$`, d.Name)
	}
	require.Panics(t, func() { definition("stepwise_no_such_metric") })
}
