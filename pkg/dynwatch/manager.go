// Package dynwatch holds the informers of kinds known only at run time, as the objects of
// a tenant name them (a PipelineTrigger's spec.resource): shared by every watcher of a
// kind, keeping of each object only what its watchers read, started with the first
// watcher and stopped some time after the last.
package dynwatch

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/stepwise-dev/stepwise/pkg/semantic"
)

// Kind is a kind to watch: its resource, and whether its objects are namespaced.
type Kind struct {
	GVR        schema.GroupVersionResource
	Namespaced bool
}

// Keep is what an informer keeps of each object for the fields its watchers read.
type Keep interface {
	// Covers tells whether every path (objectref paths) is kept.
	Covers(paths [][]string) bool
	// Transform trims an object to what is kept, in place: the informer's transform.
	Transform(obj any) (any, error)
}

// Config is what a Manager needs.
type Config struct {
	Client dynamic.Interface
	// Resync is the informers' resync period (0: none).
	Resync time.Duration
	// ReleaseAfter is how long an informer no one watches keeps running (0: DefaultReleaseAfter).
	ReleaseAfter time.Duration
	Clock        clock.WithDelayedExecution
	// Enqueue queues a watcher when an object of its kind changes.
	Enqueue func(cache.ObjectName)
	// KeepFor is what the informer of gvr keeps for watchers reading paths.
	KeepFor func(gvr schema.GroupVersionResource, paths [][]string) Keep
}

// Manager holds the informers: one shared informer per resource, cluster-wide, made and
// started when the first watcher of that kind comes, and shared by every watcher of the
// kind. Once no watcher is left for ReleaseAfter, its informer stops and its cache goes: a
// kind watched once does not hold the process's memory and a watch for ever. The delay
// keeps a watcher whose rights come and go from making the API server list the kind each
// time. Their events queue the watchers of the kind (for a namespaced kind, those in the
// object's namespace only).
type Manager struct {
	cfg Config

	mu sync.Mutex
	// stop ends the informers; nil until Run.
	stop <-chan struct{}
	// started are the informers running.
	started map[schema.GroupVersionResource]*informer
	// watchers are the keys that watch each resource, and watching what each key watches
	// and the fields it reads.
	watchers map[schema.GroupVersionResource]map[cache.ObjectName]bool
	watching map[cache.ObjectName]watched
	// replaced is when the informer of a kind was last replaced by one keeping more
	// fields: a replacement lists the kind again, so one starts at most every
	// ReplaceInterval, however often watchers come with new fields.
	replaced map[schema.GroupVersionResource]time.Time
	// running counts the informers' goroutines, which Shutdown waits for.
	running sync.WaitGroup
}

// watched is what a key watches: its kind, and the fields it reads.
type watched struct {
	Kind
	paths [][]string
}

// informer is the informer of one kind, with what stops it.
type informer struct {
	informers.GenericInformer
	keep Keep
	// next keeps more fields, for a watcher that reads fields this one drops; it takes
	// this one's place once it has synced, and this one serves the other watchers until
	// then.
	next *informer
	// release stops it; idle is the timer that will, once no one watches the kind.
	release func()
	idle    clock.Timer
}

// ReplaceInterval is the least time between two replacements of the informer of a kind.
const ReplaceInterval = 30 * time.Second

// DefaultReleaseAfter is how long an informer no one watches keeps running.
const DefaultReleaseAfter = 10 * time.Minute

// New returns a Manager; no informer starts before Run.
func New(cfg Config) *Manager {
	if cfg.ReleaseAfter <= 0 {
		cfg.ReleaseAfter = DefaultReleaseAfter
	}
	return &Manager{
		cfg:      cfg,
		started:  map[schema.GroupVersionResource]*informer{},
		watchers: map[schema.GroupVersionResource]map[cache.ObjectName]bool{},
		watching: map[cache.ObjectName]watched{},
		replaced: map[schema.GroupVersionResource]time.Time{},
	}
}

// Run lets informers start until stop is closed; Shutdown waits for them then.
func (m *Manager) Run(stop <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stop = stop
}

// Shutdown waits for the informers to stop, once the channel given to Run is closed.
func (m *Manager) Shutdown() { m.running.Wait() }

// Watch records that key watches kind and reads paths of its objects, makes and starts the
// informer of its resource on first use, and returns its lister and whether it has
// synced. An informer that drops some of paths is replaced by one that keeps them too;
// until the replacement has synced the key gets "not synced", for a cache without the
// fields it reads would show objects without them.
func (m *Manager) Watch(key cache.ObjectName, kind Kind, paths [][]string) (cache.GenericLister, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	gvr := kind.GVR
	if old, ok := m.watching[key]; ok && old.GVR != gvr {
		m.forget(key, old.GVR)
	}
	m.watching[key] = watched{Kind: kind, paths: paths}
	if m.watchers[gvr] == nil {
		m.watchers[gvr] = map[cache.ObjectName]bool{}
	}
	m.watchers[gvr][key] = true

	inf, ok := m.started[gvr]
	if !ok {
		var err error
		if inf, err = m.start(gvr, m.pathsOf(gvr)); err != nil {
			return nil, false, err
		}
		m.started[gvr] = inf
	}
	if inf.idle != nil {
		inf.idle.Stop()
		inf.idle = nil
	}
	if next := inf.next; next != nil && next.Informer().HasSynced() {
		inf.release()
		inf, next.idle = next, nil
		m.started[gvr] = inf
	}
	if inf.keep.Covers(paths) {
		return inf.Lister(), inf.Informer().HasSynced(), nil
	}
	if inf.next == nil || !inf.next.keep.Covers(paths) {
		if last, ok := m.replaced[gvr]; ok && m.cfg.Clock.Since(last) < ReplaceInterval {
			return inf.Lister(), false, nil // the watcher comes back, as for any unsynced cache
		}
		next, err := m.start(gvr, m.pathsOf(gvr))
		if err != nil {
			return nil, false, err
		}
		if inf.next != nil {
			inf.next.release()
		}
		inf.next = next
		m.replaced[gvr] = m.cfg.Clock.Now()
	}
	return inf.next.Lister(), false, nil
}

// pathsOf gathers the fields the watchers of gvr read.
func (m *Manager) pathsOf(gvr schema.GroupVersionResource) [][]string {
	var out [][]string
	for key := range m.watchers[gvr] {
		out = append(out, m.watching[key].paths...)
	}
	return out
}

// start makes and runs an informer of gvr that keeps what watchers reading paths read,
// until the channel given to Run closes or it is released.
func (m *Manager) start(gvr schema.GroupVersionResource, paths [][]string) (*informer, error) {
	if m.stop == nil {
		return nil, errors.New("the watch manager is not running")
	}
	keep := m.cfg.KeepFor(gvr, paths)
	generic := dynamicinformer.NewFilteredDynamicInformer(m.cfg.Client, gvr, metav1.NamespaceAll, m.cfg.Resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil)
	inf := generic.Informer()
	if err := inf.SetTransform(keep.Transform); err != nil {
		return nil, fmt.Errorf("informer of %s: %w", gvr.GroupResource(), err)
	}
	if _, err := inf.AddEventHandler(m.handler(gvr)); err != nil {
		return nil, fmt.Errorf("informer of %s: %w", gvr.GroupResource(), err)
	}
	released := make(chan struct{})
	stop := make(chan struct{})
	m.running.Add(2)
	go func() {
		defer m.running.Done()
		defer close(stop)
		select {
		case <-m.stop:
		case <-released:
		}
	}()
	go func() {
		defer m.running.Done()
		inf.Run(stop)
	}()
	return &informer{GenericInformer: generic, keep: keep, release: sync.OnceFunc(func() { close(released) })}, nil
}

// Unwatch records that key watches nothing (it is gone, or may not act).
func (m *Manager) Unwatch(key cache.ObjectName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.watching[key]; ok {
		m.forget(key, old.GVR)
		delete(m.watching, key)
	}
}

// forget drops key from the watchers of gvr; the last one out sets the informer's release
// for ReleaseAfter from now.
func (m *Manager) forget(key cache.ObjectName, gvr schema.GroupVersionResource) {
	delete(m.watchers[gvr], key)
	inf, ok := m.started[gvr]
	if !ok || len(m.watchers[gvr]) > 0 || inf.idle != nil {
		return
	}
	inf.idle = m.cfg.Clock.AfterFunc(m.cfg.ReleaseAfter, func() { m.releaseIfIdle(gvr, inf) })
}

// releaseIfIdle stops the informer inf of gvr unless someone watches the kind again.
func (m *Manager) releaseIfIdle(gvr schema.GroupVersionResource, inf *informer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started[gvr] != inf || len(m.watchers[gvr]) > 0 {
		return
	}
	delete(m.started, gvr)
	delete(m.watchers, gvr)
	delete(m.replaced, gvr)
	inf.release()
	if inf.next != nil {
		inf.next.release()
	}
}

// Informer returns the informer of gvr, nil when none runs.
func (m *Manager) Informer(gvr schema.GroupVersionResource) informers.GenericInformer {
	m.mu.Lock()
	defer m.mu.Unlock()
	if inf, ok := m.started[gvr]; ok {
		return inf.GenericInformer
	}
	return nil
}

// Replacement returns the informer that will replace gvr's, keeping more fields, once it
// has synced; nil when none is pending.
func (m *Manager) Replacement(gvr schema.GroupVersionResource) informers.GenericInformer {
	m.mu.Lock()
	defer m.mu.Unlock()
	if inf, ok := m.started[gvr]; ok && inf.next != nil {
		return inf.next.GenericInformer
	}
	return nil
}

// WatchersOf lists the keys that watch gvr.
func (m *Manager) WatchersOf(gvr schema.GroupVersionResource) []cache.ObjectName {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []cache.ObjectName
	for key := range m.watchers[gvr] {
		out = append(out, key)
	}
	return out
}

// handler queues the watchers of gvr when one of its objects changes.
func (m *Manager) handler(gvr schema.GroupVersionResource) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { m.enqueueWatchers(gvr, obj) },
		UpdateFunc: func(oldObj, newObj any) {
			// A resync brings nothing new: the watchers have their own. Nor does a change
			// of fields the cache drops (a Node's heartbeat, its images).
			if before, after := accessor(oldObj), accessor(newObj); before != nil && after != nil &&
				before.GetResourceVersion() == after.GetResourceVersion() || sameButVersion(oldObj, newObj) {
				return
			}
			m.enqueueWatchers(gvr, newObj)
		},
		DeleteFunc: func(obj any) { m.enqueueWatchers(gvr, obj) },
	}
}

// sameButVersion tells whether two cached copies of an object differ in their
// resourceVersion alone.
func sameButVersion(oldObj, newObj any) bool {
	before, ok1 := oldObj.(*unstructured.Unstructured)
	after, ok2 := newObj.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return false
	}
	a, b := before.DeepCopy(), after.DeepCopy()
	a.SetResourceVersion("")
	b.SetResourceVersion("")
	return semantic.Equal(a.Object, b.Object)
}

// accessor is the metadata of an object or of a deleted object's tombstone; nil when it
// has none.
func accessor(obj any) metaObject {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	return m
}

// metaObject is the part of an object's metadata the handlers read.
type metaObject interface {
	GetNamespace() string
	GetResourceVersion() string
}

func (m *Manager) enqueueWatchers(gvr schema.GroupVersionResource, obj any) {
	meta := accessor(obj)
	if meta == nil {
		utilruntime.HandleError(fmt.Errorf("%s event for %T", gvr.GroupResource(), obj))
		return
	}
	m.mu.Lock()
	var keys []cache.ObjectName
	for key := range m.watchers[gvr] {
		if m.watching[key].Namespaced && key.Namespace != meta.GetNamespace() {
			continue
		}
		keys = append(keys, key)
	}
	m.mu.Unlock()
	for _, key := range keys {
		m.cfg.Enqueue(key)
	}
}
