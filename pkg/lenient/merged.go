package lenient

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Merged is one cache.ListerWatcher made of streams that each list and watch a part of one
// resource, chosen by field selectors on a field that moves an object from one part to
// another (a pipeline's status.resting: its full objects in one stream, the metadata of the
// resting ones in others). One informer then holds all of them, each as its stream decodes
// it, and what reads the cache needs no second lookup.
//
// An object that moves leaves one stream with DELETED and enters another with ADDED, in no
// set order between the streams. Merged delivers that as one MODIFIED, never as a deletion
// and a new object (which would make a reader take a pipeline for gone): a DELETED that is
// not certainly a deletion is held until the object shows up in another stream, or a read
// of the object (Exists) says it is gone.
type Merged struct {
	streams []cache.ListerWatcherWithContext
	cfg     MergedConfig

	mu sync.Mutex
	// rvs is each stream's resource version: its list's, then its watch's last event's.
	// Each stream resumes from its own; the reflector's single one is not used.
	rvs []string
	// known is which stream delivered each object's state the cache holds, and when.
	known map[string]streamed
	// relist makes the next watch fail as expired, so that the reflector lists again: a
	// watch ended while a deletion was held, which no resumed stream would deliver again.
	relist bool
}

// MergedConfig says how Merged tells a deletion from a move.
type MergedConfig struct {
	// Deleted tells whether a DELETED event of stream i is certainly the object's deletion
	// (e.g. a pipeline being deleted never moves to the resting streams). Optional.
	Deleted func(obj metav1.Object, stream int) bool
	// Exists reads whether the object is still there, and its UID, for a DELETED event
	// no other stream has explained after CheckAfter.
	Exists func(ctx context.Context, namespace, name string) (types.UID, bool, error)
	// CheckAfter is how long a held DELETED waits for the other streams before Exists is
	// asked: normally they deliver the move within milliseconds. Default 1 s.
	CheckAfter time.Duration
	Logger     klog.Logger
}

type streamed struct {
	uid    types.UID
	rv     uint64
	stream int
}

// NewMerged merges streams; each must select a part no other selects.
func NewMerged(cfg MergedConfig, streams ...cache.ListerWatcherWithContext) *Merged {
	if cfg.CheckAfter <= 0 {
		cfg.CheckAfter = time.Second
	}
	return &Merged{streams: streams, cfg: cfg, rvs: make([]string, len(streams)), known: map[string]streamed{}}
}

// IsWatchListSemanticsUnSupported makes the reflector list, then watch.
func (m *Merged) IsWatchListSemanticsUnSupported() bool { return true }

func (m *Merged) List(opts metav1.ListOptions) (runtime.Object, error) {
	return m.ListWithContext(context.Background(), opts)
}

func (m *Merged) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return m.WatchWithContext(context.Background(), opts)
}

// ListWithContext lists every stream whole (no pages: one continue token cannot page
// several lists) and keeps, of an object two lists hold because it moved between them,
// the newer state.
func (m *Merged) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	opts.Limit, opts.Continue = 0, ""
	out := &metav1.List{}
	rvs := make([]string, len(m.streams))
	known := map[string]streamed{}
	index := map[string]int{}
	var newest uint64
	for i, s := range m.streams {
		list, err := s.ListWithContext(ctx, opts)
		if err != nil {
			return nil, err
		}
		listMeta, err := meta.ListAccessor(list)
		if err != nil {
			return nil, err
		}
		rvs[i] = listMeta.GetResourceVersion()
		newest = max(newest, parseRV(rvs[i]))
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			obj, err := meta.Accessor(item)
			if err != nil {
				return nil, err
			}
			key := keyOf(obj)
			rv := parseRV(obj.GetResourceVersion())
			if prev, ok := known[key]; ok {
				if prev.rv >= rv {
					continue
				}
				out.Items[index[key]] = runtime.RawExtension{Object: item}
			} else {
				index[key] = len(out.Items)
				out.Items = append(out.Items, runtime.RawExtension{Object: item})
			}
			known[key] = streamed{uid: obj.GetUID(), rv: rv, stream: i}
		}
	}
	out.ResourceVersion = strconv.FormatUint(newest, 10)
	m.mu.Lock()
	m.rvs, m.known, m.relist = rvs, known, false
	m.mu.Unlock()
	return out, nil
}

// WatchWithContext watches every stream from its own resource version, and merges them.
func (m *Merged) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	m.mu.Lock()
	relist, rvs := m.relist, append([]string(nil), m.rvs...)
	m.mu.Unlock()
	if relist {
		return nil, apierrors.NewResourceExpired("a watch of merged streams ended while a deletion was held: list again")
	}
	ctx, cancel := context.WithCancel(ctx)
	watches := make([]watch.Interface, 0, len(m.streams))
	for i, s := range m.streams {
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
		events: make(chan streamEvent), checked: make(chan checkResult), done: make(chan struct{}),
		pending: map[string]heldDeletion{}}
	go mw.run(ctx)
	return mw, nil
}

type streamEvent struct {
	stream int
	event  watch.Event
	closed bool
}

type heldDeletion struct {
	event watch.Event
	uid   types.UID
}

type checkResult struct {
	key    string
	uid    types.UID
	exists bool
	err    error
}

// mergedWatch is one watch of every stream.
type mergedWatch struct {
	m       *Merged
	watches []watch.Interface
	cancel  context.CancelFunc
	out     chan watch.Event
	events  chan streamEvent
	checked chan checkResult
	done    chan struct{}
	stop    sync.Once
	// pending are the DELETED events held, by key; only run touches it.
	pending map[string]heldDeletion
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

// run forwards each stream's events through one loop, which alone reads and writes what is
// known and held, until a stream ends or the watch is stopped.
func (w *mergedWatch) run(ctx context.Context) {
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
	defer func() {
		if len(w.pending) > 0 {
			w.m.mu.Lock()
			w.m.relist = true
			w.m.mu.Unlock()
		}
	}()
	for {
		select {
		case <-w.done:
			return
		case r := <-w.checked:
			if !w.resolve(ctx, r) {
				return
			}
		case se := <-w.events:
			if se.closed {
				return
			}
			if !w.handle(ctx, se.stream, se.event) {
				return
			}
		}
	}
}

// handle applies one event of stream i; false when the watch must end.
func (w *mergedWatch) handle(ctx context.Context, i int, ev watch.Event) bool {
	if ev.Type == watch.Error {
		w.send(ev)
		return false
	}
	obj, err := meta.Accessor(ev.Object)
	if err != nil {
		return true
	}
	deliver, hold := w.apply(i, ev, obj)
	if hold {
		w.pending[keyOf(obj)] = heldDeletion{event: ev, uid: obj.GetUID()}
		w.check(ctx, keyOf(obj), obj.GetNamespace(), obj.GetName(), w.m.cfg.CheckAfter)
	}
	if deliver != nil {
		return w.send(*deliver)
	}
	return true
}

// apply records what event ev of stream i says, and returns what to deliver, if
// anything, and whether a DELETED must be held until the object is read.
func (w *mergedWatch) apply(i int, ev watch.Event, obj metav1.Object) (deliver *watch.Event, hold bool) {
	rv := obj.GetResourceVersion()
	key := keyOf(obj)
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	w.m.rvs[i] = rv
	known, isKnown := w.m.known[key]
	sameObject := isKnown && known.uid == obj.GetUID()
	switch ev.Type {
	case watch.Added, watch.Modified:
		if sameObject && parseRV(rv) < known.rv {
			return nil, false // stale: another stream delivered a newer state
		}
		delete(w.pending, key)
		ev.Type = watch.Added
		if isKnown {
			ev.Type = watch.Modified
		}
		w.m.known[key] = streamed{uid: obj.GetUID(), rv: parseRV(rv), stream: i}
		return &ev, false
	case watch.Deleted:
		if !sameObject || known.stream != i {
			return nil, false // the object moved, and the other stream already said so
		}
		if w.m.cfg.Deleted != nil && w.m.cfg.Deleted(obj, i) {
			delete(w.m.known, key)
			return &ev, false
		}
		return nil, true
	}
	return nil, false // a bookmark: only its resource version counts
}

// check asks, after a while, whether the object of a held DELETED is still there.
func (w *mergedWatch) check(ctx context.Context, key, namespace, name string, after time.Duration) {
	go func() {
		select {
		case <-time.After(after):
		case <-w.done:
			return
		}
		uid, exists, err := w.m.cfg.Exists(ctx, namespace, name)
		select {
		case w.checked <- checkResult{key: key, uid: uid, exists: exists, err: err}:
		case <-w.done:
		}
	}()
}

// resolve delivers a held DELETED whose object is gone; one that is still there moved,
// and its stream delivers it.
func (w *mergedWatch) resolve(ctx context.Context, r checkResult) bool {
	held, ok := w.pending[r.key]
	if !ok {
		return true // another stream explained it meanwhile
	}
	if r.err != nil {
		if !errors.Is(r.err, context.Canceled) {
			w.m.cfg.Logger.V(2).Info("Could not tell whether an object is deleted; asking again", "key", r.key, "err", r.err)
		}
		if obj, err := meta.Accessor(held.event.Object); err == nil {
			w.check(ctx, r.key, obj.GetNamespace(), obj.GetName(), w.m.cfg.CheckAfter)
		}
		return true
	}
	delete(w.pending, r.key)
	if r.exists && r.uid == held.uid {
		return true
	}
	w.m.mu.Lock()
	if known, ok := w.m.known[r.key]; ok && known.uid == held.uid {
		delete(w.m.known, r.key)
	}
	w.m.mu.Unlock()
	return w.send(held.event)
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
