package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	informers "github.com/stepwise-dev/stepwise/pkg/generated/informers/externalversions"
)

// tracker watches the benchmark's pipelines and notes when each one is first seen Ready,
// so that apply→Ready latency is measured with the benchmark's own clock (creation and
// condition timestamps have only second precision).
type tracker struct {
	mu      sync.Mutex
	created map[string]time.Time
	ready   map[string]time.Time
	waiters map[string]chan struct{}
	failed  map[string]string
}

// newTracker starts an informer on namespace ns and waits for its cache to sync.
func newTracker(ctx context.Context, client clientset.Interface, ns string) (*tracker, error) {
	t := &tracker{
		created: map[string]time.Time{}, ready: map[string]time.Time{},
		waiters: map[string]chan struct{}{}, failed: map[string]string{},
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Stepwise().V1alpha1().Pipelines().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.observe,
		UpdateFunc: func(_, obj any) { t.observe(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("add pipeline handler: %w", err)
	}
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		return nil, errors.New("wait for the benchmark's pipeline cache to sync: timed out")
	}
	return t, nil
}

func (t *tracker) observe(obj any) {
	p, ok := obj.(*v1alpha1.Pipeline)
	if !ok {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.ready[p.Name]; seen {
		return
	}
	switch {
	case meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady):
		t.ready[p.Name] = now
	case p.Status.Phase == v1alpha1.PipelineFailed:
		t.failed[p.Name] = meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady).Message
	default:
		return
	}
	if ch, ok := t.waiters[p.Name]; ok {
		close(ch)
		delete(t.waiters, p.Name)
	}
}

// expect registers a pipeline about to be created: it returns a channel closed once the
// pipeline is Ready (or Failed), and notes now as its creation time.
func (t *tracker) expect(name string) <-chan struct{} {
	ch := make(chan struct{})
	t.mu.Lock()
	defer t.mu.Unlock()
	t.created[name] = time.Now()
	t.waiters[name] = ch
	return ch
}

// result returns the apply→Ready latency of a pipeline, or why it has none.
func (t *tracker) result(name string) (time.Duration, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if msg, ok := t.failed[name]; ok {
		return 0, fmt.Errorf("pipeline %s failed: %s", name, msg)
	}
	ready, ok := t.ready[name]
	if !ok {
		return 0, fmt.Errorf("pipeline %s is not Ready", name)
	}
	return ready.Sub(t.created[name]), nil
}

// readyAt is when the pipeline was seen Ready.
func (t *tracker) readyAt(name string) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ready[name]
}

// pipelineSpec describes the pipelines of one run.
type pipelineSpec struct {
	steps int
	// pluginStep, when >= 0, is the index of the step served by the example plugin.
	pluginStep int
}

func (s pipelineSpec) pipeline(ns, name string) *v1alpha1.Pipeline {
	p := &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	for i := range s.steps {
		step := v1alpha1.Step{Name: fmt.Sprintf("s%d", i), Executor: "test.noop"}
		if i == s.pluginStep {
			step.Executor = "example.greet"
			step.With = map[string]string{"name": name}
		}
		p.Spec.Steps = append(p.Spec.Steps, step)
	}
	return p
}

// createAll creates the named pipelines from creators goroutines and waits until all are
// Ready, or until timeout. It returns when the first create started and when the last
// pipeline was seen Ready.
func createAll(ctx context.Context, client clientset.Interface, t *tracker, ns string, names []string,
	spec pipelineSpec, creators int, timeout time.Duration) (start, end time.Time, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	waits := make([]<-chan struct{}, len(names))
	next := make(chan int)
	errs := make(chan error, creators)
	var wg sync.WaitGroup
	start = time.Now()
	for range creators {
		wg.Go(func() {
			for i := range next {
				waits[i] = t.expect(names[i])
				_, err := client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, spec.pipeline(ns, names[i]), metav1.CreateOptions{})
				if err != nil {
					errs <- fmt.Errorf("create pipeline %s: %w", names[i], err)
					return
				}
			}
		})
	}
feed:
	for i := range names {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = fmt.Errorf("create pipelines: %w", ctx.Err())
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err != nil {
		return start, end, err
	}
	select {
	case err := <-errs:
		return start, end, err
	default:
	}

	for i, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return start, end, fmt.Errorf("wait for pipeline %s to be Ready (%d of %d done): %w", names[i], i, len(names), ctx.Err())
		}
		if _, err := t.result(names[i]); err != nil {
			return start, end, err
		}
		end = maxTime(end, t.readyAt(names[i]))
	}
	return start, end, nil
}

// sequentialLatencies creates the pipelines one after the other, each once the previous is
// Ready (within timeout): apply→Ready of a tenant applying one pipeline at a time.
func sequentialLatencies(ctx context.Context, client clientset.Interface, t *tracker, ns string, names []string,
	spec pipelineSpec, timeout time.Duration) ([]time.Duration, error) {
	out := make([]time.Duration, 0, len(names))
	for _, name := range names {
		if _, _, err := createAll(ctx, client, t, ns, []string{name}, spec, 1, timeout); err != nil {
			return nil, err
		}
		d, err := t.result(name)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// percentiles of durations, in milliseconds.
type percentiles struct {
	P50 float64 `json:"p50Ms"`
	P90 float64 `json:"p90Ms"`
	P99 float64 `json:"p99Ms"`
	Max float64 `json:"maxMs"`
}

func percentilesOf(d []time.Duration) percentiles {
	if len(d) == 0 {
		return percentiles{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(q*float64(len(s))+0.5) - 1
		i = min(max(i, 0), len(s)-1)
		return float64(s[i].Microseconds()) / 1000
	}
	return percentiles{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: at(1)}
}

// names returns prefix-00000, prefix-00001, ...
func names(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = fmt.Sprintf("%s-%05d", prefix, from+i)
	}
	return out
}
