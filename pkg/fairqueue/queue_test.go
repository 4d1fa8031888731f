package fairqueue

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/workqueue"
)

// tenantOf reads "a/1" as an item of tenant a.
func tenantOf(item string) string {
	tenant, _, _ := strings.Cut(item, "/")
	return tenant
}

// step is one action on the queue: add items, take what may be processed now, or mark
// items done.
type step struct {
	add  []string
	take int
	done []string
	// want is what take returns, in order; fewer than take when no more may be processed.
	want []string
}

func TestWorkersAreSharedBetweenTenants(t *testing.T) {
	tests := []struct {
		name          string
		share, borrow int
		steps         []step
	}{
		{
			name: "the lines of tenants take turns, whoever came first",
			steps: []step{
				{add: []string{"a/1", "a/2", "a/3", "b/1", "c/1", "b/2"}},
				{take: 6, want: []string{"a/1", "b/1", "c/1", "a/2", "b/2", "a/3"}},
			},
		},
		{
			name: "a tenant with one item is not starved behind one with many",
			steps: []step{
				{add: []string{"big/1", "big/2", "big/3", "big/4", "big/5"}},
				{take: 1, want: []string{"big/1"}},
				{add: []string{"small/1"}},
				{take: 1, want: []string{"small/1"}},
			},
		},
		{
			name:  "a tenant alone borrows workers up to its limit, not every worker",
			share: 2, borrow: 3,
			steps: []step{
				{add: []string{"a/1", "a/2", "a/3", "a/4", "a/5"}},
				{take: 5, want: []string{"a/1", "a/2", "a/3"}},
				// Another tenant arriving finds a worker although the first holds three.
				{add: []string{"b/1"}},
				{take: 2, want: []string{"b/1"}},
			},
		},
		{
			name:  "while another tenant waits, a tenant holds no more than its share, and the last worker goes to a tenant holding none",
			share: 2, borrow: 3,
			steps: []step{
				{add: []string{"a/1", "a/2", "a/3", "a/4", "b/1", "b/2", "b/3"}},
				// Shares of 2 (3 between 2 tenants, rounded up); b/2 would be a fourth.
				{take: 6, want: []string{"a/1", "b/1", "a/2"}},
				{done: []string{"a/1"}},
				{take: 2, want: []string{"b/2"}},
				{done: []string{"b/1", "b/2"}},
				// b's line ends: a is alone, with a share of 3, but three are busy.
				{take: 3, want: []string{"a/3", "b/3"}},
				{done: []string{"b/3"}},
				{take: 2, want: []string{"a/4"}},
			},
		},
		{
			name:  "a tenant over its share after the other arrived gets no more until it is under it",
			share: 1, borrow: 3,
			steps: []step{
				{add: []string{"a/1", "a/2", "a/3", "a/4"}},
				{take: 3, want: []string{"a/1", "a/2", "a/3"}},
				{add: []string{"b/1", "b/2"}},
				{take: 3, want: []string{"b/1"}},
				{done: []string{"a/1", "a/2"}},
				{take: 1, want: nil},
				{done: []string{"a/3"}},
				// Once a takes its turn, b is alone with items: it borrows.
				{take: 3, want: []string{"a/4", "b/2"}},
			},
		},
		{
			name: "an item added while processed is processed again after Done, once",
			steps: []step{
				{add: []string{"a/1"}},
				{take: 1, want: []string{"a/1"}},
				{add: []string{"a/1", "a/1"}},
				{take: 1, want: nil},
				{done: []string{"a/1"}},
				{take: 2, want: []string{"a/1"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := New(Config[string]{TenantOf: tenantOf, Share: tt.share, Borrow: tt.borrow})
			defer q.ShutDown()
			for i, s := range tt.steps {
				for _, item := range s.add {
					q.Add(item)
				}
				var got []string
				for range s.take {
					item, ok := q.tryGet()
					if !ok {
						break
					}
					got = append(got, item)
				}
				if s.take > 0 {
					assert.Equal(t, s.want, got, "step %d", i)
				}
				for _, item := range s.done {
					q.Done(item)
				}
			}
		})
	}
}

// A worker waiting because its tenant holds its share wakes when a Done frees one.
func TestGetWaitsForATenantToBeUnderItsShare(t *testing.T) {
	q := New(Config[string]{TenantOf: tenantOf, Share: 1, Borrow: 1})
	defer q.ShutDown()
	q.Add("a/1")
	q.Add("a/2")
	first, _ := q.Get()
	require.Equal(t, "a/1", first)

	got := make(chan string)
	go func() {
		item, _ := q.Get()
		got <- item
	}()
	q.Done(first)
	select {
	case item := <-got:
		assert.Equal(t, "a/2", item)
	case <-time.After(10 * time.Second):
		t.Fatal("Get did not return after the tenant's item was done")
	}
}

func TestShutDown(t *testing.T) {
	t.Run("workers process what waits, then stop", func(t *testing.T) {
		q := New(Config[string]{TenantOf: tenantOf})
		q.Add("a/1")
		q.ShutDown()
		q.Add("a/2") // ignored
		item, shutdown := q.Get()
		assert.Equal(t, "a/1", item)
		assert.False(t, shutdown)
		_, shutdown = q.Get()
		assert.True(t, shutdown)
		assert.True(t, q.ShuttingDown())
	})
	t.Run("a drain waits for the items being processed", func(t *testing.T) {
		q := New(Config[string]{TenantOf: tenantOf})
		q.Add("a/1")
		item, _ := q.Get()
		drained := make(chan struct{})
		go func() {
			q.ShutDownWithDrain()
			close(drained)
		}()
		require.Eventually(t, q.ShuttingDown, 10*time.Second, time.Millisecond)
		select {
		case <-drained:
			t.Fatal("ShutDownWithDrain returned while an item was processed")
		default:
		}
		q.Done(item)
		select {
		case <-drained:
		case <-time.After(10 * time.Second):
			t.Fatal("ShutDownWithDrain did not return once the item was done")
		}
	})
}

// The rate-limiting queue over a fair queue delays and requeues as client-go's does.
func TestRateLimitingQueueOverAFairQueue(t *testing.T) {
	q := NewRateLimiting(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second),
		Config[string]{TenantOf: tenantOf, Share: 1})
	defer q.ShutDown()
	q.AddRateLimited("a/1")
	q.AddAfter("b/1", time.Millisecond)
	var got []string
	for range 2 {
		item, _ := q.Get()
		got = append(got, item)
		q.Done(item)
	}
	assert.ElementsMatch(t, []string{"a/1", "b/1"}, got)
	assert.Equal(t, 1, q.NumRequeues("a/1"))
}

func TestMetrics(t *testing.T) {
	m := newFakeMetrics()
	q := New(Config[string]{Name: "test", MetricsProvider: m, TenantOf: tenantOf})
	defer q.ShutDown()
	q.Add("a/1")
	q.Add("a/1")
	q.Add("b/1")
	assert.InDelta(t, 2, m.depth.value, 0)
	for range 2 {
		item, _ := q.Get()
		q.Done(item)
	}
	assert.InDelta(t, 0, m.depth.value, 0)
	assert.InDelta(t, 2, m.adds.value, 0)
	assert.Equal(t, 2, m.latency.count)
	assert.Equal(t, 2, m.work.count)
}

// TestADrainedQueueGivesItsMemoryBack: a Go map keeps the buckets of the most keys it ever
// held, so a queue that once held 100,000 keys (an operator catching up after a restart)
// kept megabytes of empty maps for as long as it lived (make bench-scale's heap profile:
// 10.6 MB in the metrics' add times, 5.8 MB in the sets). Drained, it gives them back.
func TestADrainedQueueGivesItsMemoryBack(t *testing.T) {
	q := New(Config[string]{Name: "test", MetricsProvider: newFakeMetrics(), TenantOf: tenantOf})
	defer q.ShutDown()
	heap := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	items := make([]string, 100000)
	for i := range items {
		items[i] = fmt.Sprintf("t%d/%d", i%10, i)
	}
	before := heap()
	for _, item := range items {
		q.Add(item)
	}
	for range items {
		item, _ := q.Get()
		q.Done(item)
	}
	retained := heap() - before
	assert.Less(t, retained, int64(1<<20), "bytes retained by a drained queue")
	runtime.KeepAlive(q)
	runtime.KeepAlive(items)
}
