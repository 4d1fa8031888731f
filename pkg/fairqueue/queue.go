// Package fairqueue is a client-go workqueue that shares a controller's workers fairly
// between tenants, as the API server's Priority and Fairness shares its seats: items wait
// in one line per tenant (a namespace), the lines take turns, and while n tenants have
// items waiting each holds at most its share, the workers but one divided by n (at least
// one; a tenant alone holds all but one). The last worker only ever goes to a tenant that
// holds none: tenants whose syncs hang cannot hold every worker, a tenant that arrives is
// served at once, and a tenant with one item is never starved behind one with ten
// thousand. The rule is shares.go's.
//
// It has client-go's queue semantics (an item is processed by one worker at a time; one
// added again while processed is processed again after Done) and its metrics, and slots
// into client-go's delaying and rate-limiting queues (NewRateLimiting).
package fairqueue

import (
	"container/list"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Config configures a fair queue.
type Config[T comparable] struct {
	// Name names the queue's metrics; without a name or a provider, none are recorded.
	Name            string
	MetricsProvider workqueue.MetricsProvider
	Clock           clock.WithTicker
	// TenantOf tells whose an item is.
	TenantOf func(T) string
	// Share, when not 0, caps a tenant's part of Borrow while another tenant's items wait
	// (--max-workers-per-namespace); Borrow is at least Share.
	Share int
	// Borrow is what the tenants that hold workers hold at most together: a tenant alone
	// holds up to Borrow, and while n tenants have items waiting each holds up to
	// Borrow/n (rounded up, at least one); only a tenant that holds none takes a worker
	// beyond Borrow. Keep it under the number of workers (Shares: all but one), so that a
	// tenant arriving finds a free worker even when the others' syncs hang. Borrow and
	// Share 0: no limit; the lines still take turns.
	Borrow int
}

// Queue is a fair queue; it implements workqueue.TypedInterface.
type Queue[T comparable] struct {
	tenantOf func(T) string
	limits   limits

	cond *sync.Cond
	// lines holds the items waiting, per tenant, in the order they came; every one is
	// dirty and not being processed.
	lines map[string][]T
	// fresh are the tenants with a line and nothing being processed when their line
	// began, in the order they came: they go before the others, as their last turn is
	// older than anyone's. turns are the other tenants with a line, in the order they get
	// their next turn. A tenant is in one of them at most.
	fresh   *list.List
	turns   *list.List
	waiting int
	// inFlight counts the items of each tenant being processed.
	inFlight map[string]int
	// dirty are the items to process; processing, those being processed (an item may be
	// both: it is queued again on Done).
	dirty      sets.Set[T]
	processing sets.Set[T]

	shuttingDown bool
	drain        bool
	metrics      *queueMetrics[T]
	stop         chan struct{}
	stopOnce     sync.Once
	wg           sync.WaitGroup
}

var _ workqueue.TypedInterface[string] = (*Queue[string])(nil)

// unfinishedWorkUpdatePeriod is how often the gauges of work in progress are set, as
// client-go sets them.
const unfinishedWorkUpdatePeriod = 500 * time.Millisecond

// New returns a fair queue; cfg.TenantOf is required.
func New[T comparable](cfg Config[T]) *Queue[T] {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	q := &Queue[T]{
		tenantOf:   cfg.TenantOf,
		limits:     limits{capped: cfg.Share, pool: max(cfg.Borrow, cfg.Share)},
		cond:       sync.NewCond(&sync.Mutex{}),
		lines:      map[string][]T{},
		fresh:      list.New(),
		turns:      list.New(),
		inFlight:   map[string]int{},
		dirty:      sets.New[T](),
		processing: sets.New[T](),
		metrics:    newQueueMetrics[T](cfg.Name, cfg.MetricsProvider, cfg.Clock),
		stop:       make(chan struct{}),
	}
	if q.metrics != nil {
		q.wg.Add(1)
		go q.updateUnfinishedWorkLoop(cfg.Clock)
	}
	return q
}

// NewRateLimiting is a client-go rate-limiting queue (with its delays and retries metric)
// over a fair queue.
func NewRateLimiting[T comparable](limiter workqueue.TypedRateLimiter[T], cfg Config[T]) workqueue.TypedRateLimitingInterface[T] {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[T]{
		Name: cfg.Name, MetricsProvider: cfg.MetricsProvider, Clock: cfg.Clock, Queue: New(cfg),
	})
	return workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[T]{
		Name: cfg.Name, MetricsProvider: cfg.MetricsProvider, Clock: cfg.Clock, DelayingQueue: delaying,
	})
}

// Add marks item as needing processing; it is ignored once the queue shuts down.
func (q *Queue[T]) Add(item T) {
	q.cond.L.Lock()
	defer q.cond.L.Unlock()
	if q.shuttingDown || q.dirty.Has(item) {
		return
	}
	q.metrics.add(item)
	q.dirty.Insert(item)
	if q.processing.Has(item) {
		return // queued again on Done
	}
	q.enqueue(item)
	q.cond.Signal()
}

// Len is how many items wait, for information only.
func (q *Queue[T]) Len() int {
	q.cond.L.Lock()
	defer q.cond.L.Unlock()
	return q.waiting
}

// Get blocks until an item may be processed: the first of the first tenant in turn that
// holds fewer workers than it may. Call Done with it once processed.
func (q *Queue[T]) Get() (item T, shutdown bool) {
	q.cond.L.Lock()
	defer q.cond.L.Unlock()
	for {
		if item, ok := q.next(); ok {
			q.metrics.get(item)
			q.processing.Insert(item)
			q.dirty.Delete(item)
			q.dirty = shrunk(q.dirty)
			return item, false
		}
		// Nothing may be processed: no item waits (the end, once shutting down), or every
		// tenant with items holds its share, and a Done will wake us.
		if q.waiting == 0 && q.shuttingDown {
			var zero T
			return zero, true
		}
		q.cond.Wait()
	}
}

// Done marks item as processed, queues it again if it was added meanwhile, and lets its
// tenant's next item go.
func (q *Queue[T]) Done(item T) {
	q.cond.L.Lock()
	defer q.cond.L.Unlock()
	q.metrics.done(item)
	if !q.processing.Has(item) {
		return
	}
	q.processing.Delete(item)
	q.processing = shrunk(q.processing)
	tenant := q.tenantOf(item)
	if q.inFlight[tenant]--; q.inFlight[tenant] <= 0 {
		delete(q.inFlight, tenant)
	}
	if q.dirty.Has(item) {
		q.enqueue(item)
	}
	// Several workers may wait for a tenant under its share, or a drain for the end.
	q.cond.Broadcast()
}

// ShutDown makes the queue ignore new items; workers process what waits, then stop.
func (q *Queue[T]) ShutDown() {
	q.shutDown(false)
}

// ShutDownWithDrain is ShutDown that also waits until every item being processed is Done.
func (q *Queue[T]) ShutDownWithDrain() {
	q.shutDown(true)
	q.cond.L.Lock()
	defer q.cond.L.Unlock()
	for q.drain && q.processing.Len() > 0 {
		q.cond.Wait()
	}
}

// ShuttingDown tells whether ShutDown was called.
func (q *Queue[T]) ShuttingDown() bool {
	q.cond.L.Lock()
	defer q.cond.L.Unlock()
	return q.shuttingDown
}

func (q *Queue[T]) shutDown(drain bool) {
	q.stopOnce.Do(func() { close(q.stop) })
	q.wg.Wait()
	q.cond.L.Lock()
	defer q.cond.L.Unlock()
	q.drain = drain
	q.shuttingDown = true
	q.cond.Broadcast()
}

// enqueue puts item at the end of its tenant's line. A tenant without a line gets one and
// the last turn, or, with nothing being processed, the last of the first turns: a tenant
// applying one item at a time is served next, whoever has thousands waiting.
func (q *Queue[T]) enqueue(item T) {
	tenant := q.tenantOf(item)
	line, ok := q.lines[tenant]
	switch {
	case ok:
	case q.inFlight[tenant] == 0:
		q.fresh.PushBack(tenant)
	default:
		q.turns.PushBack(tenant)
	}
	q.lines[tenant] = append(line, item)
	q.waiting++
}

// next takes the first item of the first tenant in turn that may have one more worker,
// and sends that tenant to the end of the turns.
func (q *Queue[T]) next() (T, bool) {
	turns, e := q.first()
	if e == nil {
		var zero T
		return zero, false
	}
	turns.Remove(e)
	return q.take(e.Value.(string)), true //nolint:forcetypeassert // the lists hold only tenants.
}

// first finds the first tenant in turn that may have one more worker, and the list it is
// in; nil when none may. The tenants it skips hold workers already, so it looks at no
// more tenants than there are workers busy. The shares are those of the tenants with
// items waiting now, as they come and go.
func (q *Queue[T]) first() (*list.List, *list.Element) {
	busy, waiting := q.processing.Len(), len(q.lines)
	for _, turns := range []*list.List{q.fresh, q.turns} {
		for e := turns.Front(); e != nil; e = e.Next() {
			tenant := e.Value.(string) //nolint:forcetypeassert // the lists hold only tenants.
			if q.limits.allow(q.inFlight[tenant], busy, waiting) {
				return turns, e
			}
		}
	}
	return nil, nil
}

// take takes the first item of tenant's line, whose turn it is, and gives the tenant the
// last turn if its line goes on.
func (q *Queue[T]) take(tenant string) T {
	line := q.lines[tenant]
	item := line[0]
	var zero T
	line[0] = zero // let the item be collected
	if len(line) > 1 {
		q.lines[tenant] = line[1:]
		q.turns.PushBack(tenant)
	} else {
		delete(q.lines, tenant)
	}
	q.waiting--
	q.inFlight[tenant]++
	return item
}

func (q *Queue[T]) updateUnfinishedWorkLoop(clk clock.WithTicker) {
	defer q.wg.Done()
	t := clk.NewTicker(unfinishedWorkUpdatePeriod)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			q.cond.L.Lock()
			q.metrics.updateUnfinishedWork()
			q.cond.L.Unlock()
		case <-q.stop:
			return
		}
	}
}

// shrunk returns m, or a new map once m is empty: a Go map keeps the buckets of the most
// keys it ever held, and a burst of 100,000 (an operator catching up after a restart)
// would keep theirs for as long as the queue lives.
func shrunk[M ~map[K]V, K comparable, V any](m M) M {
	if len(m) == 0 {
		return M{}
	}
	return m
}
