package trigger

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// objectInformers are the informers of the kinds triggers watch: one shared informer per
// resource, cluster-wide, made and started when the first trigger of that kind may act,
// and shared by every trigger of the kind. They run until the controller stops. Their
// events queue the triggers that watch the kind (for a namespaced kind, those in the
// object's namespace only).
type objectInformers struct {
	factory dynamicinformer.DynamicSharedInformerFactory
	enqueue func(cache.ObjectName)

	mu sync.Mutex
	// stop ends the informers; nil until the controller runs.
	stop <-chan struct{}
	// started are the informers made so far.
	started map[schema.GroupVersionResource]informers.GenericInformer
	// watchers are the triggers that watch each resource, and watching what each trigger
	// watches.
	watchers map[schema.GroupVersionResource]map[cache.ObjectName]bool
	watching map[cache.ObjectName]target
}

func newObjectInformers(client dynamic.Interface, resync time.Duration, enqueue func(cache.ObjectName)) *objectInformers {
	return &objectInformers{
		factory:  dynamicinformer.NewDynamicSharedInformerFactory(client, resync),
		enqueue:  enqueue,
		started:  map[schema.GroupVersionResource]informers.GenericInformer{},
		watchers: map[schema.GroupVersionResource]map[cache.ObjectName]bool{},
		watching: map[cache.ObjectName]target{},
	}
}

// setStop gives the channel that stops the informers; until it is set none starts.
func (o *objectInformers) setStop(stop <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stop = stop
}

// shutdown waits for the informers to stop, once their stop channel is closed.
func (o *objectInformers) shutdown() { o.factory.Shutdown() }

// watch records that the trigger key watches t, makes and starts the informer of t's
// resource on first use, and returns its lister and whether it has synced.
func (o *objectInformers) watch(key cache.ObjectName, t target) (cache.GenericLister, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if old, ok := o.watching[key]; ok && old.gvr != t.gvr {
		delete(o.watchers[old.gvr], key)
	}
	o.watching[key] = t
	if o.watchers[t.gvr] == nil {
		o.watchers[t.gvr] = map[cache.ObjectName]bool{}
	}
	o.watchers[t.gvr][key] = true

	inf, ok := o.started[t.gvr]
	if !ok {
		if o.stop == nil {
			return nil, false, errors.New("the trigger controller is not running")
		}
		inf = o.factory.ForResource(t.gvr)
		informer := inf.Informer()
		if err := informer.SetTransform(trimObject); err != nil {
			return nil, false, fmt.Errorf("informer of %s: %w", t.gvr.GroupResource(), err)
		}
		if _, err := informer.AddEventHandler(o.handler(t.gvr)); err != nil {
			return nil, false, fmt.Errorf("informer of %s: %w", t.gvr.GroupResource(), err)
		}
		o.started[t.gvr] = inf
		o.factory.Start(o.stop)
	}
	return inf.Lister(), inf.Informer().HasSynced(), nil
}

// unwatch records that the trigger key watches nothing (it is gone, or may not act).
func (o *objectInformers) unwatch(key cache.ObjectName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if old, ok := o.watching[key]; ok {
		delete(o.watchers[old.gvr], key)
		delete(o.watching, key)
	}
}

// informer returns the informer of gvr, nil when none has started.
func (o *objectInformers) informer(gvr schema.GroupVersionResource) informers.GenericInformer {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.started[gvr]
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
			// A resync brings nothing new: the triggers have their own.
			if before, after := accessor(oldObj), accessor(newObj); before != nil && after != nil &&
				before.GetResourceVersion() == after.GetResourceVersion() {
				return
			}
			o.enqueueWatchers(gvr, newObj)
		},
		DeleteFunc: func(obj any) { o.enqueueWatchers(gvr, obj) },
	}
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

// trimObject drops from the cached objects what a trigger never reads and that is often
// the largest part of them: metadata.managedFields.
func trimObject(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
