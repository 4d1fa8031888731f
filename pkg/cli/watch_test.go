package cli

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/internal/apitest"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
)

// withoutClock drops the time at the start of each line.
func withoutClock(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		_, rest, _ := strings.Cut(l, " ")
		lines = append(lines, rest)
	}
	return lines
}

// startWatch runs watchPipeline in the background once the fake serves its watch, and
// returns the channel of its result.
func startWatch(t *testing.T, sw *fake.Clientset, out *apitest.SyncBuffer, timeout time.Duration) <-chan error {
	t.Helper()
	watching := make(chan struct{})
	var once sync.Once
	sw.PrependWatchReactor("pipelines", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w, err := sw.Tracker().Watch(v1alpha1.SchemeGroupVersion.WithResource("pipelines"), action.GetNamespace())
		once.Do(func() { close(watching) })
		return true, w, err
	})
	done := make(chan error, 1)
	go func() {
		done <- watchPipeline(context.Background(), sw, "demo", "hello", timeout, &lineRenderer{w: out})
	}()
	select {
	case <-watching:
	case err := <-done:
		t.Fatalf("watch ended before it started: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not start")
	}
	return done
}

func update(t *testing.T, sw *fake.Clientset, p *v1alpha1.Pipeline) {
	t.Helper()
	_, err := sw.StepwiseV1alpha1().Pipelines("demo").Update(context.Background(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func result(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("the watch did not end")
		return nil
	}
}

func succeeded(p *v1alpha1.Pipeline) {
	p.Status.Phase = v1alpha1.PipelineSucceeded
	p.Status.Progress = "3/3"
	p.Status.CurrentStep = ""
	p.Status.Conditions = ready(metav1.ConditionTrue, "Succeeded", "all 3 steps succeeded", 9*time.Second)
	p.Status.Steps[1].Phase = v1alpha1.StepSucceeded
	p.Status.Steps[1].Hook = v1alpha1.HookPostCreate
	p.Status.Steps[1].Message = ""
	p.Status.Steps = append(p.Status.Steps, v1alpha1.StepStatus{Name: "publish", Phase: v1alpha1.StepSucceeded, Hook: v1alpha1.HookPostCreate, Attempts: 1})
}

func TestWatchUntilReady(t *testing.T) {
	_, sw := fakeClients(pipeline(v1alpha1.StepRunning))
	var out apitest.SyncBuffer
	done := startWatch(t, sw, &out, time.Minute)

	update(t, sw, pipeline(v1alpha1.StepRunning, succeeded))
	require.NoError(t, result(t, done))
	assert.Equal(t, []string{
		"step prepare Succeeded PostCreate attempt 1: recorded",
		"step build Running Create attempt 3: applied 2 of 3 objects: waiting",
		"pipeline demo/hello Running 1/3 Ready=False StepRunning: step build",
		"step build Succeeded PostCreate attempt 3",
		"step publish Succeeded PostCreate attempt 1",
		"pipeline demo/hello Succeeded 3/3 Ready=True Succeeded: all 3 steps succeeded",
	}, withoutClock(out.String()), "a line for each change, steps before the pipeline")
}

func TestWatchUntilFailed(t *testing.T) {
	_, sw := fakeClients(pipeline(v1alpha1.StepRunning))
	var out apitest.SyncBuffer
	done := startWatch(t, sw, &out, time.Minute)

	update(t, sw, pipeline(v1alpha1.StepFailed, failedBuild))
	assert.ErrorIs(t, result(t, done), errPipelineFailed)
	assert.Contains(t, out.String(), "pipeline demo/hello Failed 1/3 Ready=False StepFailed: step build failed: forbidden")
}

func TestWatchWaitsForARequestedRetry(t *testing.T) {
	retrying := func(p *v1alpha1.Pipeline) { p.Annotations = map[string]string{"stepwise.dev/retry": ""} }
	_, sw := fakeClients(pipeline(v1alpha1.StepFailed, failedBuild, retrying))
	var out apitest.SyncBuffer
	done := startWatch(t, sw, &out, time.Minute)

	// The Failed status is about to change: the watch goes on until the retry is picked
	// up and the pipeline succeeds.
	update(t, sw, pipeline(v1alpha1.StepRunning))
	update(t, sw, pipeline(v1alpha1.StepRunning, succeeded))
	require.NoError(t, result(t, done))
	assert.Contains(t, out.String(), "Ready=True Succeeded")
}

func TestWatchTeardownToTheEnd(t *testing.T) {
	deleting := func(p *v1alpha1.Pipeline) {
		p.DeletionTimestamp = at(time.Minute)
		p.Finalizers = []string{"stepwise.dev/teardown"}
		p.Status.Phase = v1alpha1.PipelineDeleting
		p.Status.Conditions = ready(metav1.ConditionFalse, "Deleting", "tearing down step build", time.Minute)
	}
	_, sw := fakeClients(pipeline(v1alpha1.StepRunning, succeeded, deleting))
	var out apitest.SyncBuffer
	done := startWatch(t, sw, &out, time.Minute)
	// Deleted before the watch saw it, the pipeline would just be not found.
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "Ready=False Deleting") }, 10*time.Second, 10*time.Millisecond)

	require.NoError(t, sw.StepwiseV1alpha1().Pipelines("demo").Delete(context.Background(), "hello", metav1.DeleteOptions{}))
	require.NoError(t, result(t, done))
	assert.Contains(t, out.String(), "pipeline demo/hello is gone: its teardown finished")
}

func TestWatchTimesOut(t *testing.T) {
	_, sw := fakeClients(pipeline(v1alpha1.StepRunning))
	var out apitest.SyncBuffer
	done := startWatch(t, sw, &out, 300*time.Millisecond)
	err := result(t, done)
	require.Error(t, err)
	assert.NotErrorIs(t, err, errPipelineFailed)
	assert.Contains(t, err.Error(), "pipeline demo/hello neither Ready nor failed after 300ms (phase Running)")
}

func TestWatchOfAMissingPipeline(t *testing.T) {
	_, sw := fakeClients()
	err := watchPipeline(context.Background(), sw, "demo", "hello", 10*time.Second, &lineRenderer{w: &apitest.SyncBuffer{}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"hello" not found`)
}

func TestScreenRendererRedrawsInPlace(t *testing.T) {
	var out apitest.SyncBuffer
	r := &screenRenderer{w: &out}
	r.tick(t0) // nothing to draw yet
	assert.Empty(t, out.String())
	r.render(pipeline(v1alpha1.StepRunning), t0.Add(12*time.Second))
	r.tick(t0.Add(13 * time.Second))
	frames := strings.Split(out.String(), "\x1b[H\x1b[2J")
	require.Len(t, frames, 3, "each draw clears the screen first")
	assert.Contains(t, frames[1], "build     k8s.apply     Running     Create       3          10s")
	assert.Contains(t, frames[2], "build     k8s.apply     Running     Create       3          11s", "a tick redraws with the time running on")
}
