package reconcile

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/stepwise-dev/stepwise/pkg/fairqueue"
)

// Queue is the workqueue of a controller's keys.
type Queue = workqueue.TypedRateLimitingInterface[cache.ObjectName]

// QueueConfig is what NewQueue needs.
type QueueConfig struct {
	// Name names the queue in its metrics.
	Name    string
	Metrics workqueue.MetricsProvider
	Clock   clock.WithTicker
	// Share and Borrow are how many workers a namespace holds, and may hold while the
	// others idle (fairqueue.Shares).
	Share, Borrow int
}

// NewQueue is a controller's queue of namespaced keys: namespaces take turns, so that one
// with thousands of objects, or whose syncs hang, does not hold up another's, and each
// holds at most its share of the workers. A failed sync backs off per key, from 50 ms to
// 5 minutes; the controllers' own waits (a step's retry, a cooldown) are requeues, not
// failures.
func NewQueue(cfg QueueConfig) Queue {
	return fairqueue.NewRateLimiting(
		workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](50*time.Millisecond, 5*time.Minute),
		fairqueue.Config[cache.ObjectName]{
			Name:            cfg.Name,
			MetricsProvider: cfg.Metrics,
			Clock:           cfg.Clock,
			TenantOf:        func(key cache.ObjectName) string { return key.Namespace },
			Share:           cfg.Share,
			Borrow:          cfg.Borrow,
		},
	)
}

// overlaySize bounds how many of its own writes a controller keeps over an informer's
// cache: a bound on memory, not a tuning knob.
const overlaySize = 1000

// NewOverlay is the cache a controller reads: the informer's, overlaid with the
// controller's own writes (Mutation) until the informer delivers them, each at most ttl.
// With includeAdds, an object the controller created is seen before the informer has it
// (a count of what it started must include it). The controller's handlers keep it in step
// with OnAddOrUpdate and OnDelete.
func NewOverlay(logger klog.Logger, informer cache.SharedIndexInformer, ttl time.Duration, includeAdds bool) cache.MutationCache {
	return cache.NewIntegerResourceVersionMutationCacheWithOptions(logger, informer.GetStore(),
		cache.MutationCacheOptions{Indexer: informer.GetIndexer(), TTL: ttl, MaxCacheSize: overlaySize, IncludeAdds: includeAdds})
}

// Workers run a controller's syncs.
type Workers struct {
	Queue Queue
	// Kind names the keys in logs and in the panics' count.
	Kind   string
	Sync   SyncFunc
	Panics PanicRecorder
	// Grace is how long running syncs may go on once ctx is done, before their context
	// is cancelled (0: at once).
	Grace time.Duration
}

// Run runs n workers until ctx is done, then shuts the queue down and waits for them:
// for Grace, then it cancels the syncs' context and waits for them to return. The syncs
// run under work, which the caller may end sooner (a lost lease cancels what runs).
func (w Workers) Run(ctx, work context.Context, n int) {
	logger := klog.FromContext(ctx)
	workCtx, cancelWork := context.WithCancel(work)
	defer cancelWork()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ProcessNext(workCtx, w.Queue, w.Kind, w.Sync, w.Panics) {
			}
		})
	}
	<-ctx.Done()
	w.Queue.ShutDown()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.Grace):
		if w.Grace > 0 {
			logger.Info("Grace period over, cancelling running syncs", "kind", w.Kind)
		}
		cancelWork()
		<-done
	}
}
