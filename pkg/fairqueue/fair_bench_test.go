package fairqueue

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The fairness model's timings: a hog's item holds its worker hogItem (a hook that is
// slow or hangs until the call bound), tenant B's item tenantItem (a sync whose steps
// finish at once). tenantSamples of B's items are measured per phase and iteration.
const (
	hogItem       = 20 * time.Millisecond
	tenantItem    = 2 * time.Millisecond
	tenantSamples = 200
)

// BenchmarkFairness models make bench's fairness row on the queue alone: flooding
// namespaces (tenant A; with flooding=2 a second one too) keep their lines long with items
// that take hogItem each, while tenant B adds one item at a time and waits until it is
// done, as the benchmark applies one pipeline at a time and waits until it is Ready. It
// reports B's p99 from Add to done under the load divided by B's p99 alone (p99-ratio;
// the benchmark's target is at most 2), at the operator's default worker counts.
func BenchmarkFairness(b *testing.B) {
	for _, workers := range []int{8, 16} {
		for _, flooding := range []int{1, 2} {
			b.Run(fmt.Sprintf("workers=%d/flooding=%d", workers, flooding), func(b *testing.B) {
				var alone, loaded []time.Duration
				for b.Loop() {
					a, l := fairnessRun(workers, flooding)
					alone, loaded = append(alone, a...), append(loaded, l...)
				}
				aloneP99, loadedP99 := p99(alone), p99(loaded)
				b.ReportMetric(float64(aloneP99.Microseconds())/1000, "alone-p99-ms")
				b.ReportMetric(float64(loadedP99.Microseconds())/1000, "loaded-p99-ms")
				b.ReportMetric(float64(loadedP99)/float64(aloneP99), "p99-ratio")
			})
		}
	}
}

// fairnessRun serves a queue shared as the engine's (Shares with the default flag) with
// workers, and measures B's items alone, then under the load of flooding namespaces.
func fairnessRun(workers, flooding int) (alone, loaded []time.Duration) {
	share, borrow := Shares(workers, 0)
	q := New(Config[string]{TenantOf: tenantOf, Share: share, Borrow: borrow})
	tenantDone := make(chan struct{})
	// cycled is closed once the hogs' items have been done as many times as there are
	// workers: their lines have had the workers they may take.
	cycled := make(chan struct{})
	var hogsDone atomic.Int64
	var closeCycled sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				tenant := tenantOf(item)
				if tenant == "b" {
					time.Sleep(tenantItem)
					q.Done(item)
					tenantDone <- struct{}{}
					continue
				}
				time.Sleep(hogItem)
				q.Done(item)
				// The hog's line stays as long: one more for each done.
				q.Add(fmt.Sprintf("%s/%d", tenant, hogsDone.Add(1)+int64(1<<20)))
				if hogsDone.Load() >= int64(workers) {
					closeCycled.Do(func() { close(cycled) })
				}
			}
		})
	}
	measure := func(phase string) []time.Duration {
		out := make([]time.Duration, 0, tenantSamples)
		for i := range tenantSamples {
			start := time.Now()
			q.Add(fmt.Sprintf("b/%s-%d", phase, i))
			<-tenantDone
			out = append(out, time.Since(start))
		}
		return out
	}
	alone = measure("alone")
	for h := range flooding {
		for i := range 4 * workers {
			q.Add(fmt.Sprintf("hog%d/%d", h, i))
		}
	}
	<-cycled
	loaded = measure("loaded")
	q.ShutDown()
	wg.Wait()
	return alone, loaded
}

func p99(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*99/100]
}
