package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/stepwise-dev/stepwise/internal/apitest"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
	informers "github.com/stepwise-dev/stepwise/pkg/generated/informers/externalversions"
)

// call is one hook call seen by a recordingExecutor.
type call struct {
	Step    string
	Hook    v1alpha1.Hook
	Attempt int32
}

func (c call) String() string { return fmt.Sprintf("%s/%s#%d", c.Step, c.Hook, c.Attempt) }

// hookFunc scripts what a hook answers.
type hookFunc func(ctx context.Context, req *executor.Request) (contract.Result, error)

// recordingExecutor records every hook call, in order, and answers as scripted per
// step and hook; unscripted hooks are done at once.
type recordingExecutor struct {
	executor.Func
	name string

	mu       sync.Mutex
	calls    []call
	requests []executor.Request
	script   map[string]hookFunc // key: step/hook
	// params, when set, are the declarations Describe gives.
	params []contract.Parameter
}

func newRecordingExecutor(name string) *recordingExecutor {
	e := &recordingExecutor{name: name, script: map[string]hookFunc{}}
	e.Func = executor.Func{ExecutorName: name, Run: func(ctx context.Context, req *executor.Request) (contract.Result, error) {
		return e.hook(ctx, v1alpha1.Hook(req.Hook), req)
	}}
	return e
}

// Describe declares the parameter "manifest" as YAML, as k8s.apply does, and one untyped
// parameter, which leaves the declarations incomplete: the tests' steps may set any other.
func (e *recordingExecutor) Describe() contract.Description {
	if e.params != nil {
		return contract.Description{Parameters: e.params}
	}
	return contract.Description{Parameters: []contract.Parameter{{Name: "manifest", Type: contract.ParamYAML}, {Name: "any"}}}
}

func (e *recordingExecutor) on(step string, hook v1alpha1.Hook, f hookFunc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.script[step+"/"+string(hook)] = f
}

func (e *recordingExecutor) Calls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, len(e.calls))
	for i, c := range e.calls {
		out[i] = c.String()
	}
	return out
}

func (e *recordingExecutor) reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls, e.requests = nil, nil
}

func (e *recordingExecutor) lastRequest() executor.Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.requests[len(e.requests)-1]
}

func (e *recordingExecutor) hook(ctx context.Context, h v1alpha1.Hook, req *executor.Request) (contract.Result, error) {
	e.mu.Lock()
	e.calls = append(e.calls, call{Step: req.Step, Hook: h, Attempt: req.Attempt})
	e.requests = append(e.requests, *req)
	f := e.script[req.Step+"/"+string(h)]
	e.mu.Unlock()
	if f == nil {
		return contract.Result{Done: true}, nil
	}
	return f(ctx, req)
}

// fakeClients hands out clients (kube may be nil) and remembers whom they were for.
type fakeClients struct {
	mu    sync.Mutex
	asked []string
	err   error
	kube  kubernetes.Interface
}

func (f *fakeClients) ForServiceAccount(namespace, name string) (*executor.Clients, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, namespace+"/"+name)
	return &executor.Clients{Kube: f.kube}, f.err
}

var start = time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)

// fixture drives the controller's syncHandler the way sample-controller's tests do: the
// objects sit in the informer's indexer, and the fake clientset records what the
// controller does.
type fixture struct {
	t        testing.TB
	ctx      context.Context
	client   *fake.Clientset
	indexer  cache.Indexer
	clock    *testingclock.FakeClock
	recorder *record.FakeRecorder
	exec     *recordingExecutor
	clients  *fakeClients
	// namespaces holds the namespace "ns", Active unless a test says otherwise.
	namespaces cache.Indexer
	// templates is the informer's cache of PipelineTemplates.
	templates cache.Indexer
	// approvals and triggers are the informers' caches of Approvals and triggers; access
	// answers whether a user may approve.
	approvals cache.Indexer
	triggers  cache.Indexer
	access    *fakeApprovalAccess
	c         *Controller
	// versions gives the writes' resourceVersions: the fake clientset gives none, and the
	// controller compares them as an API server's (integers that grow with each write).
	versions apitest.Versions
	// trimmed makes refresh put into the cache what the informer's transform keeps
	// (TrimForCache), as the operator's informers do.
	trimmed bool
	// standIns makes refresh put into the cache a resting pipeline's metadata alone
	// (RestingStandIn), as the operator's resting streams do.
	standIns bool
}

func newFixture(t testing.TB, objects ...*v1alpha1.Pipeline) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	var objs []runtime.Object
	for _, p := range objects {
		objs = append(objs, p)
	}
	f := &fixture{
		t:        t,
		ctx:      ctx,
		client:   fake.NewClientset(objs...),
		clock:    testingclock.NewFakeClock(start),
		recorder: record.NewFakeRecorder(100),
		exec:     newRecordingExecutor("test.record"),
		clients:  &fakeClients{},
		access:   &fakeApprovalAccess{},
	}
	registry := executor.NewRegistry()
	require.NoError(t, registry.Register(f.exec))
	f.namespaces = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, f.namespaces.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}))

	factory := informers.NewSharedInformerFactory(f.client, 0)
	informer := factory.Stepwise().V1alpha1().Pipelines()
	templates := factory.Stepwise().V1alpha1().PipelineTemplates()
	approvals := factory.Stepwise().V1alpha1().Approvals()
	triggers := factory.Stepwise().V1alpha1().PipelineTriggers()
	c, err := New(ctx, Config{
		Approvals:      approvals,
		Triggers:       triggers,
		ApprovalAccess: f.access,
		Client:         f.client,
		Informer:       informer,
		Executors:      registry,
		Clients:        f.clients,
		Namespaces:     corelisters.NewNamespaceLister(f.namespaces),
		Templates:      templates,
		Recorder:       f.recorder,
		Clock:          f.clock,
		Jitter:         func(d time.Duration) time.Duration { return d },
	})
	require.NoError(t, err)
	f.c = c
	f.indexer = informer.Informer().GetIndexer()
	f.templates = templates.Informer().GetIndexer()
	f.approvals = approvals.Informer().GetIndexer()
	f.triggers = triggers.Informer().GetIndexer()
	f.client.PrependReactor("*", "pipelines", apitest.PipelineWrites(f.client.Tracker(), &f.versions, f.clock.Now))
	for _, p := range objects {
		require.NoError(t, f.indexer.Add(p))
	}
	f.client.ClearActions()
	return f
}

// restart builds a new controller over what the API holds, as after an operator restart.
func (f *fixture) restart() *fixture {
	f.t.Helper()
	p := f.get("p")
	g := newFixture(f.t, p)
	g.exec = f.exec
	registry := executor.NewRegistry()
	require.NoError(f.t, registry.Register(g.exec))
	g.c.executors = registry
	g.clock.SetTime(f.clock.Now())
	for _, a := range f.approvals.List() {
		require.NoError(f.t, g.approvals.Add(a))
	}
	for _, t := range f.triggers.List() {
		require.NoError(f.t, g.triggers.Add(t))
	}
	g.access.allowed = f.access.allowed
	return g
}

// terminateNamespace marks the namespace "ns" as being deleted, as the API server does.
func (f *fixture) terminateNamespace() {
	f.t.Helper()
	now := metav1.NewTime(f.clock.Now())
	require.NoError(f.t, f.namespaces.Update(&corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "ns", DeletionTimestamp: &now},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating},
	}))
}

// get returns a pipeline as the API holds it.
func (f *fixture) get(name string) *v1alpha1.Pipeline {
	f.t.Helper()
	p, err := f.client.StepwiseV1alpha1().Pipelines("ns").Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return p
}

// refresh copies what the API holds into the informer's cache, as a watch event would.
func (f *fixture) refresh(name string) {
	f.t.Helper()
	p, err := f.client.Tracker().Get(v1alpha1.SchemeGroupVersion.WithResource("pipelines"), "ns", name)
	if err != nil {
		obj, exists, _ := f.indexer.GetByKey("ns/" + name)
		if exists {
			require.NoError(f.t, f.indexer.Delete(obj))
		}
		return
	}
	if f.trimmed {
		obj, _ := TrimForCache(p.DeepCopyObject())
		p = obj.(runtime.Object)
	}
	if whole := p.(*v1alpha1.Pipeline); f.standIns && whole.Status.Resting != "" {
		obj, _ := RestingStandIn(whole.Status.Resting)(whole.DeepCopy())
		p = obj.(runtime.Object)
	}
	require.NoError(f.t, f.indexer.Update(p))
}

// sync runs one reconcile of pipeline ns/name and then refreshes the cache.
func (f *fixture) sync(name string) time.Duration {
	f.t.Helper()
	requeue, err := f.c.syncHandler(f.ctx, cache.ObjectName{Namespace: "ns", Name: name})
	require.NoError(f.t, err)
	f.refresh(name)
	return requeue
}

// syncUntilIdle syncs until a sync changes nothing in the API and asks for no requeue, as
// the informer would drive it; it fails the test after a bound.
func (f *fixture) syncUntilIdle(name string) {
	f.t.Helper()
	for range 50 {
		before := len(f.writes())
		requeue := f.sync(name)
		if len(f.writes()) == before && requeue == 0 {
			return
		}
		if requeue > 0 && len(f.writes()) == before {
			return // waiting on the clock
		}
	}
	f.t.Fatalf("pipeline %s did not settle in 50 syncs", name)
}

// writes lists the API actions recorded, as "verb resource[/subresource]".
func (f *fixture) writes() []string { return apitest.Writes(f.client) }

// events drains the recorded Events as "Type Reason".
func (f *fixture) events() []string { return apitest.EventReasons(f.recorder) }

// delete marks the pipeline deleted the way the API server does while finalizers remain.
func (f *fixture) delete(name string) {
	f.t.Helper()
	p := f.get(name)
	now := metav1.NewTime(f.clock.Now())
	p.DeletionTimestamp = &now
	require.NoError(f.t, f.client.Tracker().Update(v1alpha1.SchemeGroupVersion.WithResource("pipelines"), p, "ns"))
	f.refresh(name)
}

// update applies change to the stored pipeline (spec, metadata) and refreshes the cache.
func (f *fixture) update(name string, change func(p *v1alpha1.Pipeline)) {
	f.t.Helper()
	p := f.get(name)
	change(p)
	p.ResourceVersion = f.versions.Next()
	require.NoError(f.t, f.client.Tracker().Update(v1alpha1.SchemeGroupVersion.WithResource("pipelines"), p, "ns"))
	f.refresh(name)
}

func stepsOf(names ...string) []v1alpha1.Step {
	steps := make([]v1alpha1.Step, len(names))
	for i, n := range names {
		steps[i] = v1alpha1.Step{Name: n, Executor: "test.record"}
	}
	return steps
}

// newPipeline is a pipeline named p in namespace ns, with the finalizer already on unless
// the test wants to see it added.
func newPipeline(steps ...v1alpha1.Step) *v1alpha1.Pipeline {
	return &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: "ns", UID: types.UID("uid-1"), Generation: 1,
			Finalizers: []string{v1alpha1.Finalizer},
		},
		Spec: v1alpha1.PipelineSpec{ServiceAccountName: "runner", Steps: steps},
	}
}

// syncedTwoSteps is the fixture of the pipeline p of steps a and b, changed by edit, with
// setup done, synced until idle; edit and setup may be nil.
func syncedTwoSteps(t testing.TB, edit func(*v1alpha1.Pipeline), setup func(*fixture)) *fixture {
	p := newPipeline(stepsOf("a", "b")...)
	if edit != nil {
		edit(p)
	}
	f := newFixture(t, p)
	if setup != nil {
		setup(f)
	}
	f.syncUntilIdle("p")
	return f
}

func stepStatus(p *v1alpha1.Pipeline, name string) v1alpha1.StepStatus {
	for _, s := range p.Status.Steps {
		if s.Name == name {
			return s
		}
	}
	return v1alpha1.StepStatus{}
}

func readyCondition(conds []metav1.Condition) metav1.Condition {
	for _, c := range conds {
		if c.Type == v1alpha1.ConditionReady {
			return c
		}
	}
	return metav1.Condition{}
}

func done(context.Context, *executor.Request) (contract.Result, error) {
	return contract.Result{Done: true}, nil
}

// takes is a hook that is done after d has passed on the clock.
func takes(clock *testingclock.FakeClock, d time.Duration) hookFunc {
	return func(context.Context, *executor.Request) (contract.Result, error) {
		clock.Step(d)
		return contract.Result{Done: true}, nil
	}
}

func waitFor(d time.Duration, msg string) hookFunc {
	return func(context.Context, *executor.Request) (contract.Result, error) {
		return contract.Wait(d, msg), nil
	}
}

func failWith(err error) hookFunc {
	return func(context.Context, *executor.Request) (contract.Result, error) {
		return contract.Result{}, err
	}
}

// failTimes fails the first n calls, then is done.
func failTimes(n int, err error) hookFunc {
	var mu sync.Mutex
	calls := 0
	return func(context.Context, *executor.Request) (contract.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls <= n {
			return contract.Result{}, err
		}
		return contract.Result{Done: true}, nil
	}
}

var errBoom = errors.New("boom")
