// Package lenient builds informers for Stepwise's own kinds that decode each object on its
// own. The clientset decodes a list as a whole, so one object the API server admitted but
// the Go types cannot decode (a duration stored before the schema bounded it, a CRD
// applied without its rules) fails the list and the watch of every object, and an
// operator that waits for its caches never starts. Here such an object is kept aside: the
// cache holds a stand-in (its metadata, and its status when that decodes) and an
// Undecodable record says why, so that the controller reports it on the object while
// every other object is served.
package lenient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	goruntime "runtime"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// FaultCounter counts objects that could not be decoded; *metrics.Faults is one.
type FaultCounter interface {
	Undecodable(resource string)
}

// Config says what to watch and how.
type Config struct {
	// Client is the REST client of the resource's group and version.
	Client rest.Interface
	// Resource is the plural name, e.g. "pipelines"; Namespace "" watches every namespace.
	Resource  string
	Namespace string
	Resync    time.Duration
	// ParameterCodec encodes list options (the clientset's scheme.ParameterCodec).
	ParameterCodec runtime.ParameterCodec
	// Undecodable records the objects that could not be decoded; nil: a new record.
	Undecodable *Undecodable
	// Faults counts undecodable objects; optional.
	Faults FaultCounter
	// Transform, when set, is applied to each object as soon as it is decoded (it must be
	// the informer's transform, or what that does again does nothing): a list of 100,000
	// objects is then never held in memory as decoded, only as the cache keeps them.
	Transform cache.TransformFunc
	Logger    klog.Logger
	// FieldSelector, when set, selects the objects listed and watched.
	FieldSelector string
	// MetadataOnly asks the API server for the objects' metadata alone
	// (PartialObjectMetadata), decoded into T with nothing else set.
	MetadataOnly bool
	// ListNone makes a list return no objects, only the resource version to watch from
	// (a transient stream of Merged): the objects reach the cache only when they change.
	ListNone bool
}

// Accept headers of metadata-only lists and watches, as k8s.io/client-go/metadata asks.
const (
	acceptMetadataList = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
	acceptMetadata     = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
)

// NewInformer returns a shared informer of T, indexed by namespace as the generated
// informers are, and the record of the objects it could not decode.
func NewInformer[T any, PT Object[T]](cfg Config) (cache.SharedIndexInformer, *Undecodable) {
	if cfg.Undecodable == nil {
		cfg.Undecodable = NewUndecodable()
	}
	lw := &listWatch[T, PT]{cfg: cfg, undecodable: cfg.Undecodable}
	return informerOf[T, PT](lw, cfg.Resync, lw.undecodable), lw.undecodable
}

// NewMergedInformer is NewInformer of the part of one resource whole selects, merged with
// the transient parts (Merged; their configs need ListNone), sharing one record of what
// could not be decoded. onList, optional, is called after each list.
func NewMergedInformer[T any, PT Object[T]](onList func(), whole Config, transient ...Config) (cache.SharedIndexInformer, *Undecodable) {
	record := whole.Undecodable
	if record == nil {
		record = NewUndecodable()
	}
	streamOf := func(cfg Config) cache.ListerWatcherWithContext {
		cfg.Undecodable = record
		return &listWatch[T, PT]{cfg: cfg, undecodable: record}
	}
	streams := make([]cache.ListerWatcherWithContext, len(transient))
	for i, cfg := range transient {
		streams[i] = streamOf(cfg)
	}
	return informerOf[T, PT](NewMerged(onList, streamOf(whole), streams...), whole.Resync, record), record
}

func informerOf[T any, PT Object[T]](lw cache.ListerWatcher, resync time.Duration, record *Undecodable) cache.SharedIndexInformer {
	informer := cache.NewSharedIndexInformer(lw, PT(new(T)), resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	// A deleted object's record goes with it (a watch DELETED forgets it too; this also
	// covers deletions a relist finds).
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if o, ok := obj.(metav1.Object); ok {
			record.forget(o.GetUID())
		}
	}})
	return informer
}

// listWatch lists and watches through the REST client, decoding objects one by one.
type listWatch[T any, PT Object[T]] struct {
	cfg         Config
	undecodable *Undecodable
}

// IsWatchListSemanticsUnSupported makes the reflector list, then watch: the list is
// decoded here item by item, and a streamed initial list would need the same care again
// for no gain (measured no faster from the API server; docs/testing.md).
func (lw *listWatch[T, PT]) IsWatchListSemanticsUnSupported() bool { return true }

func (lw *listWatch[T, PT]) request(opts *metav1.ListOptions) *rest.Request {
	if lw.cfg.FieldSelector != "" {
		opts.FieldSelector = lw.cfg.FieldSelector
	}
	req := lw.cfg.Client.Get().Resource(lw.cfg.Resource).VersionedParams(opts, lw.cfg.ParameterCodec)
	if lw.cfg.Namespace != "" {
		req = req.Namespace(lw.cfg.Namespace)
	}
	if lw.cfg.MetadataOnly {
		accept := acceptMetadataList
		if opts.Watch {
			accept = acceptMetadata
		}
		req = req.SetHeader("Accept", accept)
	}
	return req
}

// List and Watch complete cache.ListerWatcher; the reflector calls the context forms.
func (lw *listWatch[T, PT]) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

func (lw *listWatch[T, PT]) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

// ListWithContext decodes the list as it streams in, a batch of items at a time: a list of
// 100,000 objects is hundreds of megabytes of JSON, which neither the body nor a copy of
// each item need hold at once.
func (lw *listWatch[T, PT]) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if lw.cfg.ListNone {
		// The API server's resource version, at the cost of one object. Not from the
		// watch cache ("0", as a reflector's first list asks): it ignores the limit, and
		// a restart measured with 100,000 resting pipelines listed them all.
		opts.Limit, opts.Continue = 1, ""
		opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
	}
	body, err := lw.request(&opts).Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = body.Close() }()
	out, err := lw.decodeList(body)
	if err != nil {
		return nil, fmt.Errorf("decode list of %s: %w", lw.cfg.Resource, err)
	}
	if lw.cfg.ListNone {
		out.Items, out.Continue, out.RemainingItemCount = nil, "", nil
	}
	return out, nil
}

// decodeList reads a list object from r: its metadata, and its items a batch at a time.
func (lw *listWatch[T, PT]) decodeList(r io.Reader) (*metav1.List, error) {
	v := newValueReader(r)
	out := &metav1.List{}
	if err := v.delim('{'); err != nil {
		return nil, unexpected(err)
	}
	for first := true; ; first = false {
		more, err := v.more(first, '}')
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
		key, err := v.key()
		if err != nil {
			return nil, err
		}
		switch key {
		case "items":
			if err := lw.decodeItems(v, out); err != nil {
				return nil, err
			}
			continue
		case "metadata":
			raw, err := v.value()
			if err != nil {
				return nil, err
			}
			if err := json.Unmarshal(raw, &out.ListMeta); err != nil {
				return nil, fmt.Errorf("list metadata: %w", err)
			}
		default: // apiVersion, kind
			if _, err := v.value(); err != nil {
				return nil, err
			}
		}
	}
	return out, unexpected(v.delim('}'))
}

// listBatch is how many items are read before they are decoded, side by side on every CPU
// the process may use: decoding is most of what a restart with many objects costs.
// listBatchBytes bounds the raw bytes of a batch too: objects are up to about 1.5 MiB,
// and 256 of them read ahead would hold hundreds of MiB (seen: a replica becoming leader
// over a tenant's 120 largest pipelines peaked at 297 MiB) where the cache keeps little.
const (
	listBatch      = 256
	listBatchBytes = 8 << 20
)

// rawBatch is the raw items read ahead of their decoding.
type rawBatch struct {
	items [][]byte
	bytes int
}

// add keeps raw and tells whether the batch is full: listBatch items, or listBatchBytes.
func (b *rawBatch) add(raw []byte) bool {
	b.items = append(b.items, raw)
	b.bytes += len(raw)
	return len(b.items) >= listBatch || b.bytes >= listBatchBytes
}

func (b *rawBatch) reset() { b.items, b.bytes = b.items[:0], 0 }

func (lw *listWatch[T, PT]) decodeItems(v *valueReader, out *metav1.List) error {
	if c, err := v.peek(); err != nil {
		return unexpected(err)
	} else if c == 'n' {
		raw, err := v.value()
		if err == nil && string(raw) != "null" {
			err = fmt.Errorf("items: want an array, got %s", raw)
		}
		return err
	}
	if err := v.delim('['); err != nil {
		return fmt.Errorf("items: %w", unexpected(err))
	}
	batch := rawBatch{items: make([][]byte, 0, listBatch)}
	for first := true; ; first = false {
		more, err := v.more(first, ']')
		if err != nil {
			return fmt.Errorf("item %d: %w", len(out.Items)+len(batch.items), err)
		}
		if !more {
			break
		}
		raw, err := v.value()
		if err != nil {
			return fmt.Errorf("item %d: %w", len(out.Items)+len(batch.items), err)
		}
		if batch.add(raw) {
			lw.decodeBatch(batch.items, out)
			batch.reset()
		}
	}
	lw.decodeBatch(batch.items, out)
	return unexpected(v.delim(']'))
}

// decodeBatch decodes raw items in parallel and appends them to out in their order, less
// those that could not even be made stand-ins of.
func (lw *listWatch[T, PT]) decodeBatch(batch [][]byte, out *metav1.List) {
	objs := make([]PT, len(batch))
	workers := min(goruntime.GOMAXPROCS(0), len(batch))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(batch); i += workers {
				if obj, ok := lw.decode(batch[i]); ok {
					objs[i] = obj
				}
			}
		})
	}
	wg.Wait()
	for i, obj := range objs {
		if obj != nil {
			out.Items = append(out.Items, runtime.RawExtension{Object: obj})
		}
		batch[i] = nil
	}
}

func (lw *listWatch[T, PT]) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	req := lw.request(&opts)
	if opts.TimeoutSeconds != nil {
		req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
	}
	body, err := req.Stream(ctx)
	if err != nil {
		return nil, err
	}
	return watch.NewStreamWatcher(&eventDecoder[T, PT]{lw: lw, body: body, values: newValueReader(body)},
		apierrors.NewClientErrorReporter(500, "GET", "ClientWatchDecoding")), nil
}

// decode decodes one object, recording a failure; false: not even a stand-in could be
// made, and the object is left out (logged).
func (lw *listWatch[T, PT]) decode(raw []byte) (PT, bool) {
	obj, decodeErr, err := decode[T, PT](raw)
	if err != nil {
		lw.cfg.Logger.Error(err, "Object left out of the cache: it cannot be decoded", "resource", lw.cfg.Resource)
		if lw.cfg.Faults != nil {
			lw.cfg.Faults.Undecodable(lw.cfg.Resource)
		}
		return nil, false
	}
	if lw.cfg.Transform != nil {
		transformed, err := lw.cfg.Transform(obj)
		if t, ok := transformed.(PT); err == nil && ok {
			obj = t
		}
	}
	if decodeErr == nil {
		lw.undecodable.forget(obj.GetUID())
		return obj, true
	}
	if lw.undecodable.record(obj, decodeErr) {
		lw.cfg.Logger.Error(decodeErr, "Object cannot be decoded; it is kept aside and reported on the object",
			"resource", lw.cfg.Resource, "namespace", obj.GetNamespace(), "name", obj.GetName(), "resourceVersion", obj.GetResourceVersion())
		if lw.cfg.Faults != nil {
			lw.cfg.Faults.Undecodable(lw.cfg.Resource)
		}
	}
	return obj, true
}

// eventDecoder reads a watch's JSON events and decodes their objects one by one.
type eventDecoder[T any, PT Object[T]] struct {
	lw     *listWatch[T, PT]
	body   io.ReadCloser
	values *valueReader
}

type rawEvent struct {
	Type   watch.EventType
	Object []byte
}

// next reads one event; io.EOF when the stream ends between events.
func (d *eventDecoder[T, PT]) next() (rawEvent, error) {
	var ev rawEvent
	if err := d.values.delim('{'); err != nil {
		return ev, err
	}
	for first := true; ; first = false {
		more, err := d.values.more(first, '}')
		if err != nil {
			return ev, err
		}
		if !more {
			return ev, unexpected(d.values.delim('}'))
		}
		key, err := d.values.key()
		if err != nil {
			return ev, err
		}
		raw, err := d.values.value()
		if err != nil {
			return ev, err
		}
		switch key {
		case "type":
			if err := json.Unmarshal(raw, &ev.Type); err != nil {
				return ev, fmt.Errorf("watch event type: %w", err)
			}
		case "object":
			ev.Object = raw
		}
	}
}

func (d *eventDecoder[T, PT]) Decode() (watch.EventType, runtime.Object, error) {
	for {
		ev, err := d.next()
		if err != nil {
			return "", nil, err
		}
		switch ev.Type {
		case watch.Error:
			var status metav1.Status
			if err := json.Unmarshal(ev.Object, &status); err != nil {
				return "", nil, fmt.Errorf("decode watch error: %w", err)
			}
			return ev.Type, &status, nil
		case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
			obj, ok := d.lw.decode(ev.Object)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted {
				d.lw.undecodable.forget(obj.GetUID())
			}
			return ev.Type, obj, nil
		default:
			return "", nil, fmt.Errorf("unknown watch event type %q", ev.Type)
		}
	}
}

func (d *eventDecoder[T, PT]) Close() { _ = d.body.Close() }

// MetadataPages lists the metadata of the objects of resource that fieldSelector selects,
// in every namespace, limit at a time, and calls page with each page until the list ends
// or page fails.
func MetadataPages(ctx context.Context, client rest.Interface, resource, fieldSelector string, limit int64,
	page func([]metav1.PartialObjectMetadata) error) error {
	next := ""
	for {
		req := client.Get().Resource(resource).SetHeader("Accept", acceptMetadataList).
			Param("fieldSelector", fieldSelector).Param("limit", strconv.FormatInt(limit, 10))
		if next != "" {
			req = req.Param("continue", next)
		}
		raw, err := req.DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("list %s (%s): %w", resource, fieldSelector, err)
		}
		// Of each object only what a sweep reads: a tenant's annotations and managedFields
		// may be hundreds of KiB an object, and are not decoded.
		var list struct {
			Metadata metav1.ListMeta `json:"metadata"`
			Items    []struct {
				Metadata struct {
					Namespace         string       `json:"namespace"`
					Name              string       `json:"name"`
					UID               types.UID    `json:"uid"`
					ResourceVersion   string       `json:"resourceVersion"`
					Generation        int64        `json:"generation"`
					DeletionTimestamp *metav1.Time `json:"deletionTimestamp"`
					Finalizers        []string     `json:"finalizers"`
					Annotations       struct {
						Retry *string `json:"stepwise.dev/retry"`
					} `json:"annotations"`
				} `json:"metadata"`
			} `json:"items"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("decode list of %s: %w", resource, err)
		}
		items := make([]metav1.PartialObjectMetadata, len(list.Items))
		for i, it := range list.Items {
			m := it.Metadata
			items[i].ObjectMeta = metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion,
				Generation: m.Generation, DeletionTimestamp: m.DeletionTimestamp, Finalizers: m.Finalizers}
			if m.Annotations.Retry != nil {
				items[i].Annotations = map[string]string{"stepwise.dev/retry": *m.Annotations.Retry}
			}
		}
		if err := page(items); err != nil {
			return err
		}
		if next = list.Metadata.Continue; next == "" {
			return nil
		}
	}
}
