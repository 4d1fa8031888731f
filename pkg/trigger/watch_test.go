package trigger

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/dynwatch"
	informers "github.com/stepwise-dev/stepwise/pkg/generated/informers/externalversions"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// inNamespace is a copy of trig in namespace ns.
func inNamespace(trig *v1alpha1.PipelineTrigger, ns string) *v1alpha1.PipelineTrigger {
	trig = trig.DeepCopy()
	trig.Namespace = ns
	trig.UID += "-" + "other"
	return trig
}

// TestOneInformerPerKind: the triggers of a kind share one informer, made when the first
// of them may act; a kind no trigger may watch has none.
func TestOneInformerPerKind(t *testing.T) {
	second := triggertest.Trigger()
	second.Name = "retire-too"
	denied := webAppTrigger()
	denied.Spec.ServiceAccountName = "nobody"
	f := newFixture(t, objs(triggertest.Trigger(), second, denied, newTemplate("retire-node"), newTemplate("web"), triggertest.Node("n1", 0, retiring)))

	f.sync("retire")
	inf := f.c.objects.Informer(nodesGVR)
	require.NotNil(t, inf)
	f.sync("retire-too")
	assert.Same(t, inf, f.c.objects.Informer(nodesGVR), "shared")
	assert.ElementsMatch(t, []cache.ObjectName{keyOf("retire"), keyOf("retire-too")}, f.c.objects.WatchersOf(nodesGVR))

	f.sync("web")
	assert.Equal(t, v1alpha1.TriggerReasonForbidden, readyOf(f.trigger("web")).Reason)
	assert.Nil(t, f.c.objects.Informer(webappsGVR), "not watched for a trigger that may not")
}

// TestObjectEventsQueueTheTriggersOfTheirKind: an object's change queues the triggers of
// its kind: every one for a cluster-scoped kind, those of its namespace for a namespaced
// one.
func TestObjectEventsQueueTheTriggersOfTheirKind(t *testing.T) {
	other := inNamespace(webAppTrigger(), "other")
	f := newFixture(t, objs(triggertest.Trigger(), webAppTrigger(), other, newTemplate("retire-node"), newTemplate("web")))
	f.rbac.allow("system:serviceaccount:other:deployer", "webapps", "other", "list", "watch")
	for _, key := range []cache.ObjectName{keyOf("retire"), keyOf("web"), {Namespace: "other", Name: "web"}} {
		_, err := f.c.syncHandler(f.ctx, key)
		require.NoError(t, err)
		f.waitInformers()
	}
	queued := func() []string {
		t.Helper()
		var keys []string
		require.Eventually(t, func() bool {
			keys = append(keys, drain(f.c)...)
			return len(keys) > 0
		}, 5*time.Second, time.Millisecond)
		time.Sleep(50 * time.Millisecond) // and nothing more comes
		keys = append(keys, drain(f.c)...)
		slices.Sort(keys)
		return slices.Compact(keys)
	}
	drain(f.c)

	f.createObject(triggertest.WebApp("ns", "shop", 0, nil))
	assert.Equal(t, []string{"ns/web"}, queued())
	f.createObject(triggertest.WebApp("other", "blog", 0, nil))
	assert.Equal(t, []string{"other/web"}, queued())
	f.createObject(triggertest.Node("n1", 0, nil))
	assert.Equal(t, []string{"ns/retire"}, queued())

	// A trigger that no longer watches the kind is not queued by it.
	f.rbac.allow("system:serviceaccount:ns:deployer", "nodes", "", "list", "watch")
	f.updateTrigger("web", func(tr *v1alpha1.PipelineTrigger) {
		tr.Spec.Resource = v1alpha1.TriggerResource{APIVersion: "v1", Kind: "Node"}
	})
	f.sync("web")
	drain(f.c)
	f.createObject(triggertest.WebApp("ns", "wiki", 0, nil))
	f.createObject(triggertest.Node("n2", 0, nil))
	assert.Equal(t, []string{"ns/retire", "ns/web"}, queued())
}

// TestPipelineAndTemplateEventsQueueTheirTrigger: a pipeline's change queues the trigger
// its label names, even when the label is a hash of a long name; a template's arrival
// queues the triggers that use it; a trigger's own status write queues nothing.
func TestPipelineAndTemplateEventsQueueTheirTrigger(t *testing.T) {
	long := triggertest.Trigger()
	long.Name = strings.Repeat("long-", 20) + "trigger"
	f := newFixture(t, objs(triggertest.Trigger(), long, webAppTrigger()))

	f.c.onPipeline(&v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p",
		Labels: map[string]string{v1alpha1.LabelTrigger: rules.LabelValueOf(long.Name)}}})
	assert.Equal(t, []string{"ns/" + long.Name}, drain(f.c))
	f.c.onPipeline(&v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "p",
		Labels: map[string]string{v1alpha1.LabelTrigger: "retire"}}})
	f.c.onPipeline(&v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}})
	assert.Empty(t, drain(f.c), "another namespace's, or no trigger's")

	f.c.onTemplate(cache.DeletedFinalStateUnknown{Obj: newTemplate("retire-node")})
	got := drain(f.c)
	slices.Sort(got)
	assert.Equal(t, []string{"ns/" + long.Name, "ns/retire"}, got)

	trig := triggertest.Trigger()
	trig.ResourceVersion = "1"
	written := trig.DeepCopy()
	written.ResourceVersion = "2"
	written.Status.Matched = 3
	f.c.onTriggerUpdate(trig, written)
	assert.Empty(t, drain(f.c), "a status write")
	changed := written.DeepCopy()
	changed.ResourceVersion, changed.Generation = "3", 2
	f.c.onTriggerUpdate(written, changed)
	f.c.onTriggerUpdate(changed, changed) // a resync
	assert.Equal(t, []string{"ns/retire"}, drain(f.c))
}

// TestRunDrivesTriggersThroughInformers runs the whole controller, workers and informers
// included: the informers' events alone carry the trigger from creation to its pipelines,
// and a node labelled later gets its own.
func TestRunDrivesTriggersThroughInformers(t *testing.T) {
	f := newFixture(t, objs(triggertest.Trigger(), newTemplate("retire-node"), triggertest.Node("n1", 0, retiring)))
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// A controller of its own over a started factory (the fixture's is not started).
	factory := informers.NewSharedInformerFactory(f.client, 0)
	sw := factory.Stepwise().V1alpha1()
	c, err := New(ctx, Config{
		Client: f.client, Kube: f.kube, Dynamic: f.dynamic, Mapper: testMapper(),
		Triggers: sw.PipelineTriggers(), Templates: sw.PipelineTemplates(), Pipelines: sw.Pipelines(), NodeBudgets: sw.NodeBudgets(),
		Resources: f.c.resources.allowed, Recorder: f.recorder,
	})
	require.NoError(t, err)
	factory.Start(ctx.Done())
	done := make(chan error)
	go func() { done <- c.Run(ctx, 2) }()

	pipelines := func() int {
		list, err := f.client.StepwiseV1alpha1().Pipelines("ns").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		return len(list.Items)
	}
	require.Eventually(t, func() bool { return pipelines() == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		trig, err := f.client.StepwiseV1alpha1().PipelineTriggers("ns").Get(ctx, "retire", metav1.GetOptions{})
		return err == nil && trig.Status.Running == 1 && readyOf(trig).Reason == v1alpha1.TriggerReasonActive
	}, 10*time.Second, 10*time.Millisecond)

	// Concurrency 1: a second node waits until the first pipeline succeeds.
	n2 := triggertest.Node("n2", time.Second, retiring)
	n2.SetResourceVersion(f.versions.Next())
	_, err = f.dynamic.Resource(nodesGVR).Create(ctx, n2, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		trig, err := f.client.StepwiseV1alpha1().PipelineTriggers("ns").Get(ctx, "retire", metav1.GetOptions{})
		return err == nil && trig.Status.Waiting == 1
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1, pipelines())

	p, err := f.client.StepwiseV1alpha1().Pipelines("ns").Get(ctx, rules.PipelineName("retire", "n1", "uid-n1"), metav1.GetOptions{})
	require.NoError(t, err)
	p.Status = v1alpha1.PipelineStatus{ObservedGeneration: p.Generation, Phase: v1alpha1.PipelineSucceeded}
	_, err = f.client.StepwiseV1alpha1().Pipelines("ns").UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return pipelines() == 2 }, 10*time.Second, 10*time.Millisecond)

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
}

// TestAnInformerNoTriggerWatchesIsReleased: once the last trigger of a kind stops watching
// it, its informer runs on for a while (a trigger whose rights come back does not make the
// API server list the kind again), then stops; a trigger that watches the kind later gets
// a new one.
func TestAnInformerNoTriggerWatchesIsReleased(t *testing.T) {
	f := newFixture(t, objs(triggertest.Trigger(), newTemplate("retire-node"), triggertest.Node("n1", 0, retiring)))
	f.sync("retire")
	first := f.c.objects.Informer(nodesGVR)
	require.NotNil(t, first)

	f.c.objects.Unwatch(keyOf("retire"))
	f.clock.Step(dynwatch.DefaultReleaseAfter - time.Second)
	assert.Same(t, first, f.c.objects.Informer(nodesGVR), "kept for a while")
	f.sync("retire") // watched again in time: the same informer, and no release pending
	f.clock.Step(time.Hour)
	assert.Same(t, first, f.c.objects.Informer(nodesGVR), "a kind watched again is kept")

	f.c.objects.Unwatch(keyOf("retire"))
	f.clock.Step(dynwatch.DefaultReleaseAfter)
	assert.Nil(t, f.c.objects.Informer(nodesGVR), "released")
	require.Eventually(t, first.Informer().IsStopped, 10*time.Second, 10*time.Millisecond, "its watch ended")

	f.sync("retire")
	second := f.c.objects.Informer(nodesGVR)
	require.NotNil(t, second)
	assert.NotSame(t, first, second, "a new informer for a trigger that watches the kind again")
}

// TestATriggerReadingFieldsTheCacheDropsGetsAnInformerKeepingThem: the informer of a kind
// keeps the fields its triggers read. A trigger that reads one it drops waits (it would see
// objects without it) while a replacement keeping it lists the kind; the first informer
// serves the other triggers until the replacement has synced and takes its place. A
// replacement starts at most every dynwatch.ReplaceInterval.
func TestATriggerReadingFieldsTheCacheDropsGetsAnInformerKeepingThem(t *testing.T) {
	node := triggertest.Node("n1", 0, retiring)
	node.Object["spec"].(map[string]any)["podCIDR"] = "10.0.0.0/24"
	second := triggertest.Trigger()
	second.Name, second.UID = "by-cidr", "trigger-uid-2"
	second.Spec.Params = map[string]string{"cidr": "$(object.spec.podCIDR)"}
	third := triggertest.Trigger()
	third.Name, third.UID = "by-id", "trigger-uid-3"
	third.Spec.Params = map[string]string{"id": "$(object.spec.providerID)"}
	f := newFixture(t, objs(triggertest.Trigger(), second, third, newTemplate("retire-node"), node))

	f.sync("retire")
	first := f.c.objects.Informer(nodesGVR)
	require.NotNil(t, first)
	cached, ok, err := first.Informer().GetIndexer().GetByKey("n1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Empty(t, cached.(*unstructured.Unstructured).Object["spec"], "metadata.name is all the first trigger reads (and a Node's taints, which n1 has none of)")

	replacement := func() kubeinformers.GenericInformer { return f.c.objects.Replacement(nodesGVR) }
	requeue := f.syncWithoutRefresh("by-cidr")
	assert.Positive(t, requeue)
	assert.NotContains(t, f.pipelineNames(), rules.PipelineName("by-cidr", "n1", node.GetUID()), "no pipeline from a cache without spec.podCIDR")
	assert.Same(t, first, f.c.objects.Informer(nodesGVR), "the first informer serves retire meanwhile")
	next := replacement()
	require.NotNil(t, next)
	require.True(t, cache.WaitForCacheSync(f.ctx.Done(), next.Informer().HasSynced))

	f.sync("by-cidr")
	assert.NotSame(t, first, f.c.objects.Informer(nodesGVR), "the replacement took its place")
	assert.Equal(t, "10.0.0.0/24", f.pipelineFor("by-cidr", node).Spec.Params["cidr"])
	require.Eventually(t, first.Informer().IsStopped, 10*time.Second, 10*time.Millisecond, "the first informer stopped")

	// Another field within dynwatch.ReplaceInterval: the trigger waits for the interval.
	f.syncWithoutRefresh("by-id")
	assert.Nil(t, replacement(), "no second replacement within the interval")
	f.clock.Step(dynwatch.ReplaceInterval)
	f.syncWithoutRefresh("by-id")
	require.NotNil(t, replacement())
	require.True(t, cache.WaitForCacheSync(f.ctx.Done(), replacement().Informer().HasSynced))
	f.sync("by-id")
	assert.Equal(t, "cloud://n1", f.pipelineFor("by-id", node).Spec.Params["id"])
	assert.Equal(t, "10.0.0.0/24", f.pipelineFor("by-cidr", node).Spec.Params["cidr"], "kept for the triggers before")
}
