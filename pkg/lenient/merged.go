package lenient

import (
	"context"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Merged is one cache.ListerWatcher of a resource that a field splits in two (a pipeline's
// status.resting): a whole stream, listed and watched, of the objects that can still act,
// and transient streams, watched only, of the objects at rest. An object at rest is not
// cached: it leaves the cache as it moves into a transient stream, and comes back, as its
// stream decodes it, only when it changes there (deleted, edited, a retry asked), so that
// the cache, and a list after a restart, hold only what can act. A change made while no
// watch saw it (before a start, across a relist) is for the owner to find (OnList).
//
// A move between streams reaches the cache as a deletion and an addition, in either order.
type Merged struct {
	whole     cache.ListerWatcherWithContext
	transient []cache.ListerWatcherWithContext
	// onList is called after each list: the transient streams' changes since their last
	// watch (all of them, at a start) were not seen.
	onList func()

	mu sync.Mutex
	// rvs is each stream's resource version (the whole one first): its list's, then its
	// watch's last event's. Each stream resumes from its own; the reflector's single one
	// is not used.
	rvs []string
	// known is which stream delivered each cached object's state, and when.
	known map[string]streamed
}

type streamed struct {
	uid    types.UID
	rv     uint64
	stream int
}

// NewMerged merges the whole stream and the transient ones; each must select a part no
// other selects. The transient streams' lists must return no objects, only the resource
// version to watch from (Config.ListNone). onList, optional, is called after each list.
func NewMerged(onList func(), whole cache.ListerWatcherWithContext, transient ...cache.ListerWatcherWithContext) *Merged {
	return &Merged{whole: whole, transient: transient, onList: onList,
		rvs: make([]string, 1+len(transient)), known: map[string]streamed{}}
}

// IsWatchListSemanticsUnSupported makes the reflector list, then watch.
func (m *Merged) IsWatchListSemanticsUnSupported() bool { return true }

func (m *Merged) List(opts metav1.ListOptions) (runtime.Object, error) {
	return m.ListWithContext(context.Background(), opts)
}

func (m *Merged) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return m.WatchWithContext(context.Background(), opts)
}

func (m *Merged) streams() []cache.ListerWatcherWithContext {
	return append([]cache.ListerWatcherWithContext{m.whole}, m.transient...)
}

// ListWithContext lists the whole stream (in one piece: one continue token cannot page
// several lists) and takes of each transient stream its resource version.
func (m *Merged) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	opts.Limit, opts.Continue = 0, ""
	rvs := make([]string, len(m.rvs))
	var out *metav1.List
	known := map[string]streamed{}
	for i, s := range m.streams() {
		list, err := s.ListWithContext(ctx, opts)
		if err != nil {
			return nil, err
		}
		listMeta, err := meta.ListAccessor(list)
		if err != nil {
			return nil, err
		}
		rvs[i] = listMeta.GetResourceVersion()
		if i > 0 {
			continue // a transient stream lists nothing
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		out = &metav1.List{ListMeta: metav1.ListMeta{ResourceVersion: rvs[0]}}
		for _, item := range items {
			obj, err := meta.Accessor(item)
			if err != nil {
				return nil, err
			}
			known[keyOf(obj)] = streamed{uid: obj.GetUID(), rv: parseRV(obj.GetResourceVersion()), stream: 0}
			out.Items = append(out.Items, runtime.RawExtension{Object: item})
		}
	}
	m.mu.Lock()
	m.rvs, m.known = rvs, known
	m.mu.Unlock()
	if m.onList != nil {
		m.onList()
	}
	return out, nil
}

// WatchWithContext watches every stream from its own resource version, and merges them.
func (m *Merged) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	m.mu.Lock()
	rvs := append([]string(nil), m.rvs...)
	m.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	watches := make([]watch.Interface, 0, len(rvs))
	for i, s := range m.streams() {
		o := opts
		o.ResourceVersion, o.AllowWatchBookmarks = rvs[i], true
		w, err := s.WatchWithContext(ctx, o)
		if err != nil {
			for _, started := range watches {
				started.Stop()
			}
			cancel()
			return nil, err
		}
		watches = append(watches, w)
	}
	mw := &mergedWatch{m: m, watches: watches, cancel: cancel, out: make(chan watch.Event),
		events: make(chan streamEvent), done: make(chan struct{})}
	go mw.run()
	return mw, nil
}

type streamEvent struct {
	stream int
	event  watch.Event
	closed bool
}

// mergedWatch is one watch of every stream.
type mergedWatch struct {
	m       *Merged
	watches []watch.Interface
	cancel  context.CancelFunc
	out     chan watch.Event
	events  chan streamEvent
	done    chan struct{}
	stop    sync.Once
}

func (w *mergedWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *mergedWatch) Stop() {
	w.stop.Do(func() {
		close(w.done)
		w.cancel()
		for _, s := range w.watches {
			s.Stop()
		}
	})
}

// run forwards each stream's events through one loop until a stream ends (the reflector
// then watches again, each stream from its own resource version) or the watch is stopped.
func (w *mergedWatch) run() {
	defer close(w.out)
	defer w.Stop()
	for i, s := range w.watches {
		go func() {
			for ev := range s.ResultChan() {
				select {
				case w.events <- streamEvent{stream: i, event: ev}:
				case <-w.done:
					return
				}
			}
			select {
			case w.events <- streamEvent{stream: i, closed: true}:
			case <-w.done:
			}
		}()
	}
	for {
		select {
		case <-w.done:
			return
		case se := <-w.events:
			if se.closed {
				return
			}
			if se.event.Type == watch.Error {
				w.send(se.event)
				return
			}
			if deliver, ok := w.apply(se.stream, se.event); ok && !w.send(deliver) {
				return
			}
		}
	}
}

// apply records what event ev of stream i says, and returns what to deliver, if anything.
func (w *mergedWatch) apply(i int, ev watch.Event) (watch.Event, bool) {
	obj, err := meta.Accessor(ev.Object)
	if err != nil {
		return ev, false
	}
	rv, key := obj.GetResourceVersion(), keyOf(obj)
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	w.m.rvs[i] = rv
	known, isKnown := w.m.known[key]
	sameObject := isKnown && known.uid == obj.GetUID()
	switch {
	case ev.Type == watch.Bookmark:
		return ev, false // only its resource version counts
	case ev.Type == watch.Added && i > 0:
		return ev, false // it came to rest, or was made at rest: nothing to cache
	case ev.Type == watch.Added || ev.Type == watch.Modified:
		if sameObject && parseRV(rv) < known.rv {
			return ev, false // stale: another stream delivered a newer state
		}
		ev.Type = watch.Added
		if isKnown {
			ev.Type = watch.Modified
		}
		w.m.known[key] = streamed{uid: obj.GetUID(), rv: parseRV(rv), stream: i}
		return ev, true
	case ev.Type == watch.Deleted:
		if !sameObject || known.stream != i {
			return ev, false // not cached, or another stream has it now
		}
		delete(w.m.known, key)
		return ev, true
	}
	return ev, false
}

func (w *mergedWatch) send(ev watch.Event) bool {
	select {
	case w.out <- ev:
		return true
	case <-w.done:
		return false
	}
}

func keyOf(obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

// parseRV reads a resource version as the number etcd makes it; 0 when it is not one.
func parseRV(rv string) uint64 {
	n, _ := strconv.ParseUint(rv, 10, 64)
	return n
}
