package hostile

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
)

// canary creates one-step test.noop Pipelines in a namespace of its own, one every
// interval, and measures each from just before its create to the moment its Ready=True
// is seen: what another tenant of the operator sees of the hostile one.
type canary struct {
	client   clientset.Interface
	ns       string
	interval time.Duration
	// deadline bounds one canary, from its create to Ready; past it, it is a miss.
	deadline time.Duration

	seq     atomic.Int64
	mu      sync.Mutex
	samples map[string][]time.Duration // by phase
	misses  map[string][]string        // by phase: name and why
}

func newCanary(client clientset.Interface, ns string) *canary {
	return &canary{
		client: client, ns: ns, interval: time.Second, deadline: 30 * time.Second,
		samples: map[string][]time.Duration{}, misses: map[string][]string{},
	}
}

// runN launches n canaries under phase, one every interval, and waits for them.
func (c *canary) runN(ctx context.Context, phase string, n int) {
	c.run(ctx, phase, n, nil)
}

// start launches a canary every interval under phase until the returned function is
// called; that function waits for the canaries in flight.
func (c *canary) start(ctx context.Context, phase string) (stop func()) {
	stopCh, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		c.run(ctx, phase, 0, stopCh)
	}()
	return func() {
		close(stopCh)
		<-done
	}
}

// run launches canaries until n are (n > 0), stop is closed or ctx is done. Each runs on
// its own so that a slow one does not delay the next.
func (c *canary) run(ctx context.Context, phase string, n int, stop <-chan struct{}) {
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(c.interval)
	defer tick.Stop()
	for launched := 0; ; {
		wg.Go(func() { c.probe(ctx, phase) })
		if launched++; n > 0 && launched >= n {
			return
		}
		select {
		case <-tick.C:
		case <-stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

func canaryPipeline(name string) *v1alpha1.Pipeline {
	return &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.PipelineSpec{Steps: []v1alpha1.Step{{Name: "noop", Executor: "test.noop"}}},
	}
}

func (c *canary) probe(ctx context.Context, phase string) {
	name := fmt.Sprintf("canary-%d", c.seq.Add(1))
	ctx, cancel := context.WithTimeout(ctx, c.deadline)
	defer cancel()
	start := time.Now()
	pipelines := c.client.StepwiseV1alpha1().Pipelines(c.ns)
	created, err := pipelines.Create(ctx, canaryPipeline(name), metav1.CreateOptions{})
	if err != nil {
		c.miss(phase, name, fmt.Errorf("create: %w", err))
		return
	}
	if err := c.awaitReady(ctx, name, created.ResourceVersion); err != nil {
		c.miss(phase, name, err)
		return
	}
	latency := time.Since(start)
	c.mu.Lock()
	c.samples[phase] = append(c.samples[phase], latency)
	c.mu.Unlock()
	// Gone at once, so that the canary's namespace stays small; its teardown is a no-op.
	delCtx, delCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer delCancel()
	_ = pipelines.Delete(delCtx, name, metav1.DeleteOptions{})
}

// awaitReady watches the pipeline from rv until it is Ready, reading it again whenever
// the watch ends (it may, under load or after a compaction), until ctx is done.
func (c *canary) awaitReady(ctx context.Context, name, rv string) error {
	pipelines := c.client.StepwiseV1alpha1().Pipelines(c.ns)
	var last *v1alpha1.Pipeline
	for ctx.Err() == nil {
		w, err := pipelines.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: rv})
		if err == nil {
			for e := range w.ResultChan() {
				if p, ok := e.Object.(*v1alpha1.Pipeline); ok {
					if p.Ready() {
						w.Stop()
						return nil
					}
					last, rv = p, p.ResourceVersion
				}
			}
			w.Stop()
		}
		p, err := pipelines.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			// Back off before the next watch: the API server is busy or ctx is done.
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if p.Ready() {
			return nil
		}
		last, rv = p, p.ResourceVersion
	}
	if last != nil {
		return fmt.Errorf("not Ready within %s: phase %q, conditions %+v", c.deadline, last.Status.Phase, last.Status.Conditions)
	}
	return fmt.Errorf("not Ready within %s", c.deadline)
}

func (c *canary) miss(phase, name string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.misses[phase] = append(c.misses[phase], name+": "+err.Error())
}

// latencies are the samples of a phase, sorted.
func (c *canary) latencies(phase string) latencies {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := slices.Clone(c.samples[phase])
	slices.Sort(l)
	return l
}

func (c *canary) missed(phase string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.misses[phase])
}

// latencies are sorted durations.
type latencies []time.Duration

// percentile is the nearest-rank q-th percentile (0 for no samples).
func (l latencies) percentile(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	rank := int(math.Ceil(q*float64(len(l)))) - 1
	return l[min(max(rank, 0), len(l)-1)]
}

func (l latencies) String() string {
	if len(l) == 0 {
		return "n=0"
	}
	return fmt.Sprintf("n=%d p50=%s p99=%s max=%s", len(l),
		l.percentile(0.5).Round(time.Millisecond), l.percentile(0.99).Round(time.Millisecond), l[len(l)-1].Round(time.Millisecond))
}
