package fairqueue

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// workerPool plays a queue's workers without goroutines: fill takes items while a worker
// is free, finish marks the oldest item a tenant holds as done.
type workerPool struct {
	t       *testing.T
	q       *Queue[string]
	workers int
	held    map[string][]string
}

// newWorkerPool serves a queue shared as the engine's (Shares) with workers.
func newWorkerPool(t *testing.T, workers, limit int) *workerPool {
	share, borrow := Shares(workers, limit)
	q := New(Config[string]{TenantOf: tenantOf, Share: share, Borrow: borrow})
	t.Cleanup(q.ShutDown)
	return &workerPool{t: t, q: q, workers: workers, held: map[string][]string{}}
}

func (p *workerPool) busy() int {
	n := 0
	for _, items := range p.held {
		n += len(items)
	}
	return n
}

func (p *workerPool) flood(tenant string, n int) {
	for i := range n {
		p.q.Add(fmt.Sprintf("%s/%d", tenant, i))
	}
}

// fill gives every free worker an item, while the queue lets them have one.
func (p *workerPool) fill() {
	for p.busy() < p.workers {
		item, ok := p.q.tryGet()
		if !ok {
			return
		}
		tenant := tenantOf(item)
		p.held[tenant] = append(p.held[tenant], item)
	}
}

func (p *workerPool) finish(tenant string) {
	items := p.held[tenant]
	require.NotEmpty(p.t, items, "%s holds no worker", tenant)
	p.q.Done(items[0])
	p.held[tenant] = items[1:]
}

// counts is how many workers each tenant holds.
func (p *workerPool) counts() map[string]int {
	out := map[string]int{}
	for tenant, items := range p.held {
		if len(items) > 0 {
			out[tenant] = len(items)
		}
	}
	return out
}

// holding is how many workers each tenant holds, most first.
func (p *workerPool) holding() []int {
	out := slices.Collect(maps.Values(p.counts()))
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

// TestTheShareFollowsTheNamespacesWithWork (issue 44, item 5): with n namespaces whose
// items wait, each holds about the workers divided by n (the workers but one, divided and
// rounded up), whatever the number of workers; one worker stays free, so a namespace that
// arrives is served at once. Before, each held half the workers whatever n was: two
// namespaces held all 16, and a third had none until their items were done.
func TestTheShareFollowsTheNamespacesWithWork(t *testing.T) {
	tests := []struct {
		workers, limit, namespaces int
		want                       []int
	}{
		{workers: 16, namespaces: 1, want: []int{15}},
		{workers: 16, namespaces: 2, want: []int{8, 7}},
		{workers: 16, namespaces: 3, want: []int{5, 5, 5}},
		{workers: 16, namespaces: 4, want: []int{4, 4, 4, 3}},
		{workers: 11, namespaces: 1, want: []int{10}},
		{workers: 11, namespaces: 2, want: []int{5, 5}},
		{workers: 11, namespaces: 3, want: []int{4, 3, 3}},
		{workers: 8, namespaces: 2, want: []int{4, 3}},
		{workers: 8, namespaces: 3, want: []int{3, 2, 2}},
		{workers: 2, namespaces: 2, want: []int{1, 1}},
		// --max-workers-per-namespace caps the share while another namespace waits.
		{workers: 16, limit: 2, namespaces: 2, want: []int{2, 2}},
		{workers: 16, limit: 2, namespaces: 1, want: []int{15}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d workers, limit %d, %d namespaces", tt.workers, tt.limit, tt.namespaces), func(t *testing.T) {
			p := newWorkerPool(t, tt.workers, tt.limit)
			for i := range tt.namespaces {
				p.flood(fmt.Sprintf("ns%d", i), 3*tt.workers)
			}
			p.fill()
			assert.Equal(t, tt.want, p.holding())

			if tt.workers > tt.namespaces {
				require.Less(t, p.busy(), tt.workers, "a worker is free for a namespace that arrives")
				p.q.Add("new/1")
				p.fill()
				assert.Equal(t, []string{"new/1"}, p.held["new"], "the namespace that arrives is served at once")
			}
		})
	}
}

// TestTheSharesFollowNamespacesAsTheyComeAndGo: a namespace that arrives gets a worker at
// once, or, when another arrived just before it, as soon as one item is done; those over
// their new share give back their workers as their items are done; and a namespace that
// leaves lets the others grow again.
func TestTheSharesFollowNamespacesAsTheyComeAndGo(t *testing.T) {
	p := newWorkerPool(t, 16, 0)
	p.flood("a", 100)
	p.fill()
	require.Equal(t, map[string]int{"a": 15}, p.counts(), "a namespace alone holds all workers but one")

	p.flood("b", 100)
	p.flood("c", 6)
	p.fill()
	require.Equal(t, map[string]int{"a": 15, "b": 1}, p.counts(), "the first to arrive takes the free worker")
	p.finish("a")
	p.fill()
	require.Equal(t, map[string]int{"a": 14, "b": 1, "c": 1}, p.counts(), "the next gets the first worker freed")

	for len(p.held["a"]) > 5 {
		p.finish("a")
		p.fill()
		require.LessOrEqual(t, p.busy(), 15, "the last worker is kept for a namespace that arrives")
	}
	assert.Equal(t, map[string]int{"a": 5, "b": 5, "c": 5}, p.counts(), "three namespaces: the workers but one in three")

	// c's last item goes, then c's items are done: a and b share what c held.
	for len(p.held["c"]) > 0 {
		p.finish("c")
		p.fill()
	}
	got := p.counts()
	assert.Zero(t, got["c"])
	assert.Equal(t, 15, got["a"]+got["b"], "%v", got)
	assert.LessOrEqual(t, max(got["a"], got["b"]), 8, "two namespaces: at most 8 each, %v", got)
}

// gates hold items in their workers until released, as hooks that hang hold theirs.
type gates struct {
	mu     sync.Mutex
	open   map[string]chan struct{}
	closed bool
}

func (g *gates) gate(item string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.open[item]
	if !ok {
		c = make(chan struct{})
		g.open[item] = c
		if g.closed {
			close(c)
		}
	}
	return c
}

func (g *gates) release(item string) { close(g.gate(item)) }

func (g *gates) releaseAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for _, c := range g.open {
		select {
		case <-c:
		default:
			close(c)
		}
	}
}

// TestANamespaceThatArrivesGetsAWorker runs real workers (Get and Done), whose items hang
// until released: while two namespaces flood the queue, a third that arrives starts at
// once, and a fourth as soon as one item is done, before any other item of the floods.
func TestANamespaceThatArrivesGetsAWorker(t *testing.T) {
	for _, workers := range []int{11, 16} {
		t.Run(fmt.Sprintf("%d workers", workers), func(t *testing.T) {
			share, borrow := Shares(workers, 0)
			q := New(Config[string]{TenantOf: tenantOf, Share: share, Borrow: borrow})
			g := &gates{open: map[string]chan struct{}{}}
			started := make(chan string, 10*workers)
			var wg sync.WaitGroup
			t.Cleanup(func() {
				q.ShutDown()
				g.releaseAll()
				wg.Wait()
			})
			for range workers {
				wg.Go(func() {
					for {
						item, shutdown := q.Get()
						if shutdown {
							return
						}
						started <- item
						<-g.gate(item)
						q.Done(item)
					}
				})
			}
			next := func() string {
				t.Helper()
				select {
				case item := <-started:
					return item
				case <-time.After(10 * time.Second):
					require.FailNow(t, "no item started within 10s")
					return ""
				}
			}

			for i := range 3 * workers {
				q.Add(fmt.Sprintf("a/%d", i))
				q.Add(fmt.Sprintf("b/%d", i))
			}
			var first string
			for range workers - 1 {
				first = next()
			}
			require.Eventually(t, func() bool { return q.settled(workers) }, 10*time.Second, time.Millisecond,
				"the workers take what they may")
			q.Add("c/1")
			assert.Equal(t, "c/1", next(), "c starts at once, on the worker kept free")
			q.Add("d/1")
			g.release(first)
			assert.Equal(t, "d/1", next(), "d starts on the first worker freed")
		})
	}
}
