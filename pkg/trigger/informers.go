package trigger

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

// objectInformers are the informers of the kinds triggers watch: one shared informer per
// resource, cluster-wide, made and started when the first trigger of that kind may act,
// and shared by every trigger of the kind. Once no trigger watches a kind for
// releaseAfter, its informer stops and its cache goes: a kind a trigger watched once
// does not hold the operator's memory and a watch for ever. The delay keeps a trigger
// whose rights come and go from making the API server list the kind each time. Their
// events queue the triggers that watch the kind (for a namespaced kind, those in the
// object's namespace only).
type objectInformers struct {
	client       dynamic.Interface
	resync       time.Duration
	releaseAfter time.Duration
	clock        clock.WithDelayedExecution
	enqueue      func(cache.ObjectName)

	mu sync.Mutex
	// stop ends the informers; nil until the controller runs.
	stop <-chan struct{}
	// started are the informers running.
	started map[schema.GroupVersionResource]*objectInformer
	// watchers are the triggers that watch each resource, and watching what each trigger
	// watches and the fields it reads.
	watchers map[schema.GroupVersionResource]map[cache.ObjectName]bool
	watching map[cache.ObjectName]watched
	// replaced is when the informer of a kind was last replaced by one keeping more
	// fields: a replacement lists the kind again, so one starts at most every
	// replaceInterval, however often triggers come with new fields.
	replaced map[schema.GroupVersionResource]time.Time
	// running counts the informers' goroutines, which shutdown waits for.
	running sync.WaitGroup
}

// watched is what a trigger watches: its kind, and the fields it reads.
type watched struct {
	target
	paths [][]string
}

// objectInformer is the informer of one kind, with what stops it.
type objectInformer struct {
	informers.GenericInformer
	// kept is what it keeps of each object.
	kept keptFields
	// next keeps more fields, for a trigger that reads fields this one drops; it takes
	// this one's place once it has synced, and this one serves the other triggers until
	// then.
	next *objectInformer
	// release stops it; idle is the timer that will, once no trigger watches the kind.
	release func()
	idle    clock.Timer
}

// replaceInterval is the least time between two replacements of the informer of a kind.
const replaceInterval = 30 * time.Second

// defaultReleaseAfter is how long an informer no trigger watches keeps running.
const defaultReleaseAfter = 10 * time.Minute

func newObjectInformers(client dynamic.Interface, resync, releaseAfter time.Duration, clk clock.WithDelayedExecution, enqueue func(cache.ObjectName)) *objectInformers {
	if releaseAfter <= 0 {
		releaseAfter = defaultReleaseAfter
	}
	return &objectInformers{
		client:       client,
		resync:       resync,
		releaseAfter: releaseAfter,
		clock:        clk,
		enqueue:      enqueue,
		started:      map[schema.GroupVersionResource]*objectInformer{},
		watchers:     map[schema.GroupVersionResource]map[cache.ObjectName]bool{},
		watching:     map[cache.ObjectName]watched{},
		replaced:     map[schema.GroupVersionResource]time.Time{},
	}
}

// setStop gives the channel that stops the informers; until it is set none starts.
func (o *objectInformers) setStop(stop <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stop = stop
}

// shutdown waits for the informers to stop, once their stop channel is closed.
func (o *objectInformers) shutdown() { o.running.Wait() }

// watch records that the trigger key watches t and reads paths of its objects, makes and
// starts the informer of t's resource on first use, and returns its lister and whether it
// has synced. An informer that drops some of paths is replaced by one that keeps them
// too; until the replacement has synced the trigger gets "not synced", for a cache
// without the fields it reads would show objects without them.
func (o *objectInformers) watch(key cache.ObjectName, t target, paths [][]string) (cache.GenericLister, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if old, ok := o.watching[key]; ok && old.gvr != t.gvr {
		o.forget(key, old.gvr)
	}
	o.watching[key] = watched{target: t, paths: paths}
	if o.watchers[t.gvr] == nil {
		o.watchers[t.gvr] = map[cache.ObjectName]bool{}
	}
	o.watchers[t.gvr][key] = true

	inf, ok := o.started[t.gvr]
	if !ok {
		var err error
		if inf, err = o.start(t.gvr, o.pathsOf(t.gvr)); err != nil {
			return nil, false, err
		}
		o.started[t.gvr] = inf
	}
	if inf.idle != nil {
		inf.idle.Stop()
		inf.idle = nil
	}
	if next := inf.next; next != nil && next.Informer().HasSynced() {
		inf.release()
		inf, next.idle = next, nil
		o.started[t.gvr] = inf
	}
	if inf.kept.tree.coversAll(paths) {
		return inf.Lister(), inf.Informer().HasSynced(), nil
	}
	if inf.next == nil || !inf.next.kept.tree.coversAll(paths) {
		if last, ok := o.replaced[t.gvr]; ok && o.clock.Since(last) < replaceInterval {
			return inf.Lister(), false, nil // the trigger comes back (cacheSyncRetry)
		}
		next, err := o.start(t.gvr, o.pathsOf(t.gvr))
		if err != nil {
			return nil, false, err
		}
		if inf.next != nil {
			inf.next.release()
		}
		inf.next = next
		o.replaced[t.gvr] = o.clock.Now()
	}
	return inf.next.Lister(), false, nil
}

// pathsOf gathers the fields the triggers watching gvr read.
func (o *objectInformers) pathsOf(gvr schema.GroupVersionResource) [][]string {
	var out [][]string
	for key := range o.watchers[gvr] {
		out = append(out, o.watching[key].paths...)
	}
	return out
}

// start makes and runs an informer of gvr that keeps what triggers reading paths read,
// until the controller stops or it is released.
func (o *objectInformers) start(gvr schema.GroupVersionResource, paths [][]string) (*objectInformer, error) {
	if o.stop == nil {
		return nil, errors.New("the trigger controller is not running")
	}
	kept := keptFieldsOf(gvr, paths)
	generic := dynamicinformer.NewFilteredDynamicInformer(o.client, gvr, metav1.NamespaceAll, o.resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil)
	informer := generic.Informer()
	if err := informer.SetTransform(kept.transform); err != nil {
		return nil, fmt.Errorf("informer of %s: %w", gvr.GroupResource(), err)
	}
	if _, err := informer.AddEventHandler(o.handler(gvr)); err != nil {
		return nil, fmt.Errorf("informer of %s: %w", gvr.GroupResource(), err)
	}
	released := make(chan struct{})
	stop := make(chan struct{})
	o.running.Add(2)
	go func() {
		defer o.running.Done()
		defer close(stop)
		select {
		case <-o.stop:
		case <-released:
		}
	}()
	go func() {
		defer o.running.Done()
		informer.Run(stop)
	}()
	return &objectInformer{GenericInformer: generic, kept: kept, release: sync.OnceFunc(func() { close(released) })}, nil
}

// unwatch records that the trigger key watches nothing (it is gone, or may not act).
func (o *objectInformers) unwatch(key cache.ObjectName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if old, ok := o.watching[key]; ok {
		o.forget(key, old.gvr)
		delete(o.watching, key)
	}
}

// forget drops key from the watchers of gvr; the last one out sets the informer's release
// for releaseAfter from now.
func (o *objectInformers) forget(key cache.ObjectName, gvr schema.GroupVersionResource) {
	delete(o.watchers[gvr], key)
	inf, ok := o.started[gvr]
	if !ok || len(o.watchers[gvr]) > 0 || inf.idle != nil {
		return
	}
	inf.idle = o.clock.AfterFunc(o.releaseAfter, func() { o.releaseIfIdle(gvr, inf) })
}

// releaseIfIdle stops the informer inf of gvr unless a trigger watches the kind again.
func (o *objectInformers) releaseIfIdle(gvr schema.GroupVersionResource, inf *objectInformer) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.started[gvr] != inf || len(o.watchers[gvr]) > 0 {
		return
	}
	delete(o.started, gvr)
	delete(o.watchers, gvr)
	delete(o.replaced, gvr)
	inf.release()
	if inf.next != nil {
		inf.next.release()
	}
}

// informer returns the informer of gvr, nil when none runs.
func (o *objectInformers) informer(gvr schema.GroupVersionResource) informers.GenericInformer {
	o.mu.Lock()
	defer o.mu.Unlock()
	if inf, ok := o.started[gvr]; ok {
		return inf.GenericInformer
	}
	return nil
}

// watchersOf lists the triggers that watch gvr.
func (o *objectInformers) watchersOf(gvr schema.GroupVersionResource) []cache.ObjectName {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []cache.ObjectName
	for key := range o.watchers[gvr] {
		out = append(out, key)
	}
	return out
}

// handler queues the triggers that watch gvr when one of its objects changes.
func (o *objectInformers) handler(gvr schema.GroupVersionResource) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { o.enqueueWatchers(gvr, obj) },
		UpdateFunc: func(oldObj, newObj any) {
			// A resync brings nothing new: the triggers have their own. Nor does a change
			// of fields the cache drops (a Node's heartbeat, its images).
			if before, after := accessor(oldObj), accessor(newObj); before != nil && after != nil &&
				before.GetResourceVersion() == after.GetResourceVersion() || sameButVersion(oldObj, newObj) {
				return
			}
			o.enqueueWatchers(gvr, newObj)
		},
		DeleteFunc: func(obj any) { o.enqueueWatchers(gvr, obj) },
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

func accessor(obj any) metaObject {
	m, err := meta.Accessor(tombstoned(obj))
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

func (o *objectInformers) enqueueWatchers(gvr schema.GroupVersionResource, obj any) {
	m := accessor(obj)
	if m == nil {
		utilruntime.HandleError(fmt.Errorf("%s event for %T", gvr.GroupResource(), obj))
		return
	}
	o.mu.Lock()
	var keys []cache.ObjectName
	for key := range o.watchers[gvr] {
		if o.watching[key].namespaced && key.Namespace != m.GetNamespace() {
			continue
		}
		keys = append(keys, key)
	}
	o.mu.Unlock()
	for _, key := range keys {
		o.enqueue(key)
	}
}

// transform is the informer's transform: an object is kept as the fields say, without
// metadata.managedFields, which no trigger reads and is often the largest part of it.
func (k keptFields) transform(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		k.prune(u)
	}
	return obj, nil
}
