package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/stepwise-dev/stepwise/internal/apitest"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
	informers "github.com/stepwise-dev/stepwise/pkg/generated/informers/externalversions"
)

// TestRunDrivesPipelinesThroughInformerAndQueue runs the whole controller, workers and
// queue included, against the fake clientset: the informer's events alone must carry a
// pipeline from creation to Ready, and a deletion through teardown.
func TestRunDrivesPipelinesThroughInformerAndQueue(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	p := newPipeline(stepsOf("one", "two")...)
	p.Finalizers = nil
	client := fake.NewClientset(p)
	// Writes get growing resourceVersions, as from an API server: without them the
	// controller cannot tell its last write from an older copy the informer still holds,
	// and a worker would run from that copy (seen: step one ran twice, 3 runs in 40).
	client.PrependReactor("*", "pipelines", apitest.PipelineWrites(client.Tracker(), &apitest.Versions{}, time.Now))
	exec := newRecordingExecutor("test.record")
	exec.on("two", v1alpha1.HookCreate, failTimes(1, errBoom)) // one retry, after 10ms
	p.Spec.Steps[1].Retry = &v1alpha1.RetryPolicy{Limit: 1, Backoff: &v1alpha1.Backoff{
		Initial: &metav1.Duration{Duration: 10 * time.Millisecond}}}
	_, err := client.StepwiseV1alpha1().Pipelines("ns").Update(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)

	registry := executor.NewRegistry()
	require.NoError(t, registry.Register(exec))
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(ctx, Config{
		Client:    client,
		Informer:  factory.Stepwise().V1alpha1().Pipelines(),
		Executors: registry,
		Clients:   &fakeClients{},
		Recorder:  record.NewFakeRecorder(100),
	})
	require.NoError(t, err)
	factory.Start(ctx.Done())
	runDone := make(chan error)
	go func() { runDone <- c.Run(ctx, 2) }()

	waitForPipeline(ctx, t, client, func(p *v1alpha1.Pipeline) bool {
		return p.Status.Phase == v1alpha1.PipelineSucceeded
	})
	assert.Equal(t, []string{
		"one/PreCreate#1", "one/Create#1", "one/PostCreate#1",
		"two/PreCreate#1", "two/Create#1", "two/Create#2", "two/PostCreate#1",
	}, exec.Calls())

	// Mark it deleted as the API server would while the finalizer holds it.
	got, err := client.StepwiseV1alpha1().Pipelines("ns").Get(ctx, "p", metav1.GetOptions{})
	require.NoError(t, err)
	now := metav1.Now()
	got.DeletionTimestamp = &now
	_, err = client.StepwiseV1alpha1().Pipelines("ns").Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitForPipeline(ctx, t, client, func(p *v1alpha1.Pipeline) bool { return len(p.Finalizers) == 0 })
	assert.Equal(t, []string{"two/PreDelete#1", "two/Delete#1", "two/PostDelete#1",
		"one/PreDelete#1", "one/Delete#1", "one/PostDelete#1"}, exec.Calls()[7:])

	cancel()
	select {
	case err := <-runDone:
		assert.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
}

func waitForPipeline(ctx context.Context, t *testing.T, client *fake.Clientset, cond func(*v1alpha1.Pipeline) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := client.StepwiseV1alpha1().Pipelines("ns").Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return cond(p), nil
	})
	require.NoError(t, err)
}

// TestShutdownLetsRunningHooksFinishWithinGrace cancels the controller while a hook runs:
// the hook keeps its context for the grace period and finishes.
func TestShutdownLetsRunningHooksFinishWithinGrace(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	client := fake.NewClientset(newPipeline(stepsOf("slow")...))
	exec := newRecordingExecutor("test.record")
	started := make(chan struct{})
	hookErr := make(chan error, 1)
	exec.on("slow", v1alpha1.HookCreate, func(hctx context.Context, _ *executor.Request) (contract.Result, error) {
		close(started)
		select {
		case <-time.After(200 * time.Millisecond): // a short cloud call
			hookErr <- hctx.Err()
			return contract.Result{Done: true}, nil
		case <-hctx.Done():
			hookErr <- hctx.Err()
			return contract.Result{}, hctx.Err()
		}
	})
	registry := executor.NewRegistry()
	require.NoError(t, registry.Register(exec))
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(ctx, Config{
		Client: client, Informer: factory.Stepwise().V1alpha1().Pipelines(), Executors: registry,
		Clients: &fakeClients{}, ShutdownGrace: 10 * time.Second,
	})
	require.NoError(t, err)
	factory.Start(ctx.Done())
	runDone := make(chan error)
	go func() { runDone <- c.Run(ctx, 1) }()

	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("hook never started")
	}
	cancel()
	require.NoError(t, <-runDone)
	assert.NoError(t, <-hookErr, "the hook's context must survive shutdown within the grace period")
}

func TestEnqueueHandlesTombstones(t *testing.T) {
	f := newFixture(t)
	p := newPipeline(stepsOf("a")...)
	f.c.enqueue(cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: p})
	f.c.enqueue(p)
	f.c.enqueue("not a pipeline") // logged, not queued
	assert.Equal(t, 1, f.c.queue.Len())
	key, _ := f.c.queue.Get()
	assert.Equal(t, cache.ObjectName{Namespace: "ns", Name: "p"}, key)
}

// BenchmarkSyncInstantStep measures one reconcile pass that runs a step of three instant
// hooks and writes the status (to the fake clientset, whose cost is included).
func BenchmarkSyncInstantStep(b *testing.B) {
	t := &testing.T{}
	f := newFixture(t, newPipeline(stepsOf("one", "two", "three")...))
	f.ctx = context.Background()
	f.c.recorder = nil // FakeRecorder blocks once its buffer is full
	original := f.get("p")
	key := cache.ObjectName{Namespace: "ns", Name: "p"}
	gvr := v1alpha1.SchemeGroupVersion.WithResource("pipelines")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		_ = f.client.Tracker().Update(gvr, original.DeepCopy(), "ns")
		_ = f.indexer.Update(original)
		f.client.ClearActions()
		f.exec.reset()
		b.StartTimer()
		if _, err := f.c.syncHandler(f.ctx, key); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSyncFinishedPipeline measures the common idle reconcile (a resync of a
// finished pipeline): no hook runs and nothing is written.
func BenchmarkSyncFinishedPipeline(b *testing.B) {
	t := &testing.T{}
	f := newFixture(t, newPipeline(stepsOf("one", "two", "three")...))
	f.ctx = context.Background()
	f.c.recorder = nil
	f.syncUntilIdle("p")
	key := cache.ObjectName{Namespace: "ns", Name: "p"}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := f.c.syncHandler(f.ctx, key); err != nil {
			b.Fatal(err)
		}
	}
}
