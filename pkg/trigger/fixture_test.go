package trigger

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/stepwise-dev/stepwise/internal/apitest"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
	informers "github.com/stepwise-dev/stepwise/pkg/generated/informers/externalversions"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// start and retiring are triggertest's, as are the objects of these tests.
var (
	start    = triggertest.Start
	retiring = triggertest.Retiring
)

// fixture drives the trigger controller's syncHandler the way pkg/controller's tests drive
// the engine's: triggers, templates and pipelines sit in their informers' indexers, and the
// fake clientsets record what the controller does. The watched objects are served by a fake
// dynamic client through the controller's own shared informers, which run.
type fixture struct {
	t        testing.TB
	ctx      context.Context
	client   *fake.Clientset
	kube     *kubefake.Clientset
	dynamic  *dynamicfake.FakeDynamicClient
	rbac     *rbac
	clock    *testingclock.FakeClock
	recorder *record.FakeRecorder
	c        *Controller

	triggers, templates, pipelines, budgets cache.Indexer

	// versions gives the writes' resourceVersions (apitest.PipelineWrites).
	versions apitest.Versions
}

// nodeRetirerUser is the ServiceAccount of the triggers triggertest.Trigger makes.
const nodeRetirerUser = "system:serviceaccount:ns:retirer"

// fixtureOption changes the fixture before the controller is made.
type fixtureOption func(*Config)

func withResources(s string) fixtureOption {
	return func(cfg *Config) {
		rs, err := ParseResources(s)
		if err != nil {
			panic(err)
		}
		cfg.Resources = rs
	}
}

// newFixture makes a controller over the given objects: triggers, templates and pipelines
// go to the stepwise clientset and their indexers, *unstructured.Unstructured objects to
// the dynamic client. The ServiceAccount "retirer" of namespace ns may list and watch nodes
// cluster-wide, and "deployer" webapps in ns, unless a test takes it away.
func newFixture(t testing.TB, objs []runtime.Object, opts ...fixtureOption) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)

	var swObjs, dynObjs []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*unstructured.Unstructured); ok {
			dynObjs = append(dynObjs, o)
		} else {
			swObjs = append(swObjs, o)
		}
	}
	f := &fixture{
		t:        t,
		ctx:      ctx,
		client:   fake.NewClientset(swObjs...),
		kube:     kubefake.NewClientset(),
		rbac:     &rbac{},
		clock:    testingclock.NewFakeClock(start),
		recorder: record.NewFakeRecorder(1000),
	}
	f.dynamic = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		nodesGVR: "NodeList", webappsGVR: "WebAppList", secretsGVR: "SecretList", pipelinesGVR: "PipelineList",
	}, dynObjs...)
	f.rbac.allow(nodeRetirerUser, "nodes", "", "list", "watch")
	f.rbac.allow("system:serviceaccount:ns:deployer", "webapps", "ns", "list", "watch")
	f.kube.PrependReactor("create", "subjectaccessreviews", f.rbac.react)
	f.client.PrependReactor("*", "pipelines", apitest.PipelineWrites(f.client.Tracker(), &f.versions, f.clock.Now))

	factory := informers.NewSharedInformerFactory(f.client, 0)
	sw := factory.Stepwise().V1alpha1()
	cfg := Config{
		Client:      f.client,
		Kube:        f.kube,
		Dynamic:     f.dynamic,
		Mapper:      testMapper(),
		Triggers:    sw.PipelineTriggers(),
		Templates:   sw.PipelineTemplates(),
		Pipelines:   sw.Pipelines(),
		NodeBudgets: sw.NodeBudgets(),
		Recorder:    f.recorder,
		Clock:       f.clock,
		Operator:    triggertest.OperatorUser,
		// A gate's list of 8 MiB through the fake clients, under -race beside other
		// packages, took more than the default 10 s (TestAnObjectsGateListsInPagesWithinItsBounds).
		GatesCheckTimeout: 2 * time.Minute,
	}
	withResources(DefaultResources)(&cfg)
	for _, o := range opts {
		o(&cfg)
	}
	c, err := New(ctx, cfg)
	require.NoError(t, err)
	f.c = c
	// The object informers start on first use, with this context, as under Run.
	c.objects.Run(ctx.Done())
	t.Cleanup(c.objects.Shutdown)
	t.Cleanup(cancel) // runs first: cleanups are last in, first out

	f.triggers = sw.PipelineTriggers().Informer().GetIndexer()
	f.templates = sw.PipelineTemplates().Informer().GetIndexer()
	f.pipelines = sw.Pipelines().Informer().GetIndexer()
	f.budgets = sw.NodeBudgets().Informer().GetIndexer()
	for _, o := range swObjs {
		switch o := o.(type) {
		case *v1alpha1.PipelineTrigger:
			require.NoError(t, f.triggers.Add(o))
		case *v1alpha1.PipelineTemplate:
			require.NoError(t, f.templates.Add(o))
		case *v1alpha1.Pipeline:
			require.NoError(t, f.pipelines.Add(o))
		case *v1alpha1.NodeBudget:
			require.NoError(t, f.budgets.Add(o))
		}
	}
	f.client.ClearActions()
	return f
}

// sync runs one reconcile of trigger ns/name, then copies what the API holds into the
// informers' caches, as watch events would.
// The first sync of a trigger starts its kind's informer; while that has not synced, the
// sync learns nothing and asks to be run again, which sync does at once.
func (f *fixture) sync(name string) time.Duration {
	f.t.Helper()
	requeue := f.syncWithoutRefresh(name)
	f.refresh()
	return requeue
}

// syncWithoutRefresh is sync when the informers have not delivered what it wrote.
func (f *fixture) syncWithoutRefresh(name string) time.Duration {
	f.t.Helper()
	requeue, err := f.syncOnce(keyOf(name))
	require.NoError(f.t, err)
	return requeue
}

// syncOnce runs the sync of a trigger as its queue would: a sync finding its kind's
// informer not synced writes nothing and waits for it, and runs again once it has. Whether
// it did cannot be asked after the sync (the informer may have synced since): one that
// started or used such an informer and wrote nothing syncs again.
func (f *fixture) syncOnce(key cache.ObjectName) (time.Duration, error) {
	f.t.Helper()
	unsynced := f.unsyncedInformers()
	writes := len(f.writes())
	requeue, err := f.c.syncHandler(f.ctx, key)
	if err != nil {
		return requeue, err
	}
	if f.waitInformers() || (f.startedAmong(unsynced) && len(f.writes()) == writes) {
		return f.c.syncHandler(f.ctx, key)
	}
	return requeue, nil
}

// objectGVRs are the kinds the fixture's triggers watch.
var objectGVRs = []schema.GroupVersionResource{nodesGVR, webappsGVR, secretsGVR, pipelinesGVR}

// unsyncedInformers are the kinds whose object informer is not running and synced.
func (f *fixture) unsyncedInformers() map[schema.GroupVersionResource]bool {
	out := map[schema.GroupVersionResource]bool{}
	for _, gvr := range objectGVRs {
		if inf := f.c.objects.Informer(gvr); inf == nil || !inf.Informer().HasSynced() {
			out[gvr] = true
		}
	}
	return out
}

// startedAmong tells whether an informer of one of the kinds is running now.
func (f *fixture) startedAmong(kinds map[schema.GroupVersionResource]bool) bool {
	for gvr := range kinds {
		if f.c.objects.Informer(gvr) != nil {
			return true
		}
	}
	return false
}

// waitInformers waits until the started object informers have synced, and tells whether
// one had not.
func (f *fixture) waitInformers() bool {
	f.t.Helper()
	waited := false
	for _, gvr := range objectGVRs {
		if inf := f.c.objects.Informer(gvr); inf != nil && !inf.Informer().HasSynced() {
			waited = true
			require.True(f.t, cache.WaitForCacheSync(f.ctx.Done(), inf.Informer().HasSynced))
		}
	}
	return waited
}

// refresh copies the stored triggers and pipelines into the indexers, and drops from
// them what the store no longer has.
func (f *fixture) refresh() {
	f.t.Helper()
	for _, r := range []struct {
		resource string
		indexer  cache.Indexer
	}{{"pipelinetriggers", f.triggers}, {"pipelines", f.pipelines}} {
		gvr := v1alpha1.SchemeGroupVersion.WithResource(r.resource)
		stored, err := f.client.Tracker().List(gvr, v1alpha1.SchemeGroupVersion.WithKind(kindOf(r.resource)), "")
		require.NoError(f.t, err)
		items, err := meta.ExtractList(stored)
		require.NoError(f.t, err)
		keep := map[string]bool{}
		for _, item := range items {
			key, err := cache.MetaNamespaceKeyFunc(item)
			require.NoError(f.t, err)
			keep[key] = true
			require.NoError(f.t, r.indexer.Update(item))
		}
		for _, key := range r.indexer.ListKeys() {
			if !keep[key] {
				obj, _, _ := r.indexer.GetByKey(key)
				require.NoError(f.t, r.indexer.Delete(obj))
			}
		}
	}
}

func kindOf(resource string) string {
	if resource == "pipelinetriggers" {
		return "PipelineTrigger"
	}
	return "Pipeline"
}

// trigger returns the trigger as the API holds it.
func (f *fixture) trigger(name string) *v1alpha1.PipelineTrigger {
	f.t.Helper()
	trig, err := f.client.StepwiseV1alpha1().PipelineTriggers("ns").Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return trig
}

// updateTrigger changes the stored trigger's spec, as a user would (a new generation).
func (f *fixture) updateTrigger(name string, change func(*v1alpha1.PipelineTrigger)) {
	f.t.Helper()
	trig := f.trigger(name)
	change(trig)
	trig.Generation++
	_, err := f.client.StepwiseV1alpha1().PipelineTriggers("ns").Update(f.ctx, trig, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	f.refresh()
}

// pipelineList returns the stored pipelines of namespace ns, by name.
func (f *fixture) pipelineList() []v1alpha1.Pipeline {
	f.t.Helper()
	list, err := f.client.StepwiseV1alpha1().Pipelines("ns").List(f.ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	slices.SortFunc(list.Items, func(a, b v1alpha1.Pipeline) int { return cmpString(a.Name, b.Name) })
	return list.Items
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// pipelineNames lists the stored pipelines' names.
func (f *fixture) pipelineNames() []string {
	var names []string
	for _, p := range f.pipelineList() {
		names = append(names, p.Name)
	}
	return names
}

// pipelineFor returns the stored pipeline of a trigger's object.
func (f *fixture) pipelineFor(trigger string, obj *unstructured.Unstructured) *v1alpha1.Pipeline {
	f.t.Helper()
	p, err := f.client.StepwiseV1alpha1().Pipelines("ns").Get(f.ctx, rules.PipelineName(trigger, obj.GetName(), obj.GetUID()), metav1.GetOptions{})
	require.NoError(f.t, err)
	return p
}

// setPipelineStatus changes a stored pipeline's status, as the engine would.
func (f *fixture) setPipelineStatus(name string, change func(*v1alpha1.PipelineStatus)) {
	f.t.Helper()
	p, err := f.client.StepwiseV1alpha1().Pipelines("ns").Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	p.Status.ObservedGeneration = p.Generation
	change(&p.Status)
	_, err = f.client.StepwiseV1alpha1().Pipelines("ns").UpdateStatus(f.ctx, p, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	f.refresh()
}

// finish marks the pipeline of obj Succeeded.
func (f *fixture) finish(trigger string, obj *unstructured.Unstructured) {
	f.t.Helper()
	f.setPipelineStatus(rules.PipelineName(trigger, obj.GetName(), obj.GetUID()), func(s *v1alpha1.PipelineStatus) {
		s.Phase = v1alpha1.PipelineSucceeded
		now := metav1.NewTime(f.clock.Now())
		s.CompletionTime = &now
	})
}

// writes lists the write actions on the stepwise clientset, as "verb resource[/subresource]".
func (f *fixture) writes() []string { return apitest.Writes(f.client) }

// reads lists the reads the controller made of the API server (not the fixture's): it
// reads from its caches only.
func (f *fixture) reads() []string { return apitest.Reads(f.client) }

// events drains the recorded Events as "Type Reason Message".
func (f *fixture) events() []string { return apitest.Events(f.recorder) }

// eventReasons drains the recorded Events as "Type Reason".
func (f *fixture) eventReasons() []string { return apitest.EventReasons(f.recorder) }

// createObject creates a watched object and waits until the controller's informer has it.
func (f *fixture) createObject(obj *unstructured.Unstructured) {
	f.t.Helper()
	obj.SetResourceVersion(f.versions.Next())
	_, err := f.dynamic.Resource(gvrOf(obj)).Namespace(obj.GetNamespace()).Create(f.ctx, obj, metav1.CreateOptions{})
	require.NoError(f.t, err)
	f.waitObject(obj, true)
}

// updateObject stores obj and waits until the controller's informer has it.
func (f *fixture) updateObject(obj *unstructured.Unstructured) {
	f.t.Helper()
	obj.SetResourceVersion(f.versions.Next())
	_, err := f.dynamic.Resource(gvrOf(obj)).Namespace(obj.GetNamespace()).Update(f.ctx, obj, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	f.waitObject(obj, true)
}

// deleteObject deletes obj and waits until the controller's informer has seen it go.
func (f *fixture) deleteObject(obj *unstructured.Unstructured) {
	f.t.Helper()
	err := f.dynamic.Resource(gvrOf(obj)).Namespace(obj.GetNamespace()).Delete(f.ctx, obj.GetName(), metav1.DeleteOptions{})
	require.NoError(f.t, err)
	f.waitObject(obj, false)
}

// waitObject waits until the informer of obj's kind holds obj's resourceVersion, or no
// longer holds obj.
func (f *fixture) waitObject(obj *unstructured.Unstructured, present bool) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		inf := f.c.objects.Informer(gvrOf(obj))
		if inf == nil {
			return !present // not watched yet: the first sync lists it
		}
		got, exists, err := inf.Informer().GetIndexer().GetByKey(rules.ObjectKey(obj.GetNamespace(), obj.GetName()))
		if err != nil {
			return false
		}
		if !present {
			return !exists
		}
		return exists && got.(*unstructured.Unstructured).GetResourceVersion() == obj.GetResourceVersion()
	}, 5*time.Second, time.Millisecond)
}

func gvrOf(obj *unstructured.Unstructured) schema.GroupVersionResource {
	switch obj.GetKind() {
	case "Node":
		return nodesGVR
	case "WebApp":
		return webappsGVR
	case "Secret":
		return secretsGVR
	case "Pipeline":
		return pipelinesGVR
	}
	panic("unknown kind " + obj.GetKind())
}

// webAppTrigger is the trigger "web" of namespace ns: every WebApp, template "web",
// ServiceAccount deployer.
func webAppTrigger() *v1alpha1.PipelineTrigger {
	return &v1alpha1.PipelineTrigger{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "web-uid", Generation: 1},
		Spec: v1alpha1.PipelineTriggerSpec{
			Resource:           v1alpha1.TriggerResource{APIVersion: "demo.stepwise.dev/v1alpha1", Kind: "WebApp"},
			TemplateRef:        v1alpha1.TemplateRef{Name: "web"},
			Params:             map[string]string{"image": "$(object.spec.image)", "name": "$(object.metadata.name)"},
			ServiceAccountName: "deployer",
			Concurrency:        10,
			WhenUnmatched:      v1alpha1.UnmatchedDelete,
			UpdatePolicy:       v1alpha1.UpdateRerun,
			HistoryLimit:       10,
		},
	}
}

func newTemplate(name string) *v1alpha1.PipelineTemplate {
	return &v1alpha1.PipelineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("tpl-" + name)},
		Spec: v1alpha1.PipelineTemplateSpec{
			Params: []v1alpha1.TemplateParam{{Name: "node"}},
			Steps:  []v1alpha1.Step{{Name: "one", Executor: "test.record"}},
		},
	}
}

func readyOf(trig *v1alpha1.PipelineTrigger) metav1.Condition {
	if c := meta.FindStatusCondition(trig.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func objs(items ...runtime.Object) []runtime.Object { return items }

func keyOf(name string) cache.ObjectName { return cache.ObjectName{Namespace: "ns", Name: name} }

// drain takes every key the controller queued, without waiting, as strings.
func drain(c *Controller) []string {
	var out []string
	for c.queue.Len() > 0 {
		key, _ := c.queue.Get()
		c.queue.Done(key)
		c.queue.Forget(key)
		out = append(out, key.String())
	}
	return out
}
