package lenient

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// fakeStream is one part of a resource: a list it returns and a watch the test drives.
type fakeStream struct {
	items   []corev1.ConfigMap
	listRV  string
	mu      sync.Mutex
	watches []*watch.FakeWatcher
	// watchRVs are the resource versions its watches started from.
	watchRVs []string
}

func (s *fakeStream) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: s.listRV}, Items: s.items}, nil
}

func (s *fakeStream) WatchWithContext(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := watch.NewFakeWithChanSize(10, false)
	s.watches = append(s.watches, w)
	s.watchRVs = append(s.watchRVs, opts.ResourceVersion)
	return w, nil
}

func (s *fakeStream) last() *watch.FakeWatcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watches[len(s.watches)-1]
}

func (s *fakeStream) started() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watches)
}

func object(name, uid, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), ResourceVersion: rv}}
}

type mergedFixture struct {
	whole, resting *fakeStream
	lists          int
	merged         *Merged
}

func newMergedFixture(t *testing.T) *mergedFixture {
	t.Helper()
	f := &mergedFixture{
		whole:   &fakeStream{listRV: "10", items: []corev1.ConfigMap{*object("a", "uid-a", "5")}},
		resting: &fakeStream{listRV: "11"},
	}
	f.merged = NewMerged(func() { f.lists++ }, f.whole, f.resting)
	list, err := f.merged.ListWithContext(t.Context(), metav1.ListOptions{Limit: 500})
	require.NoError(t, err)
	require.Len(t, list.(*metav1.List).Items, 1)
	return f
}

// handle applies events in order, as the merging loop does, and returns what it delivers.
func (f *mergedFixture) handle(events ...streamEvent) []watch.Event {
	mw := &mergedWatch{m: f.merged}
	var out []watch.Event
	for _, se := range events {
		if ev, ok := mw.apply(se.stream, se.event); ok {
			out = append(out, ev)
		}
	}
	return out
}

func on(stream int, t watch.EventType, obj runtime.Object) streamEvent {
	return streamEvent{stream: stream, event: watch.Event{Type: t, Object: obj}}
}

func eventTypes(events []watch.Event) []watch.EventType {
	out := make([]watch.EventType, len(events))
	for i, ev := range events {
		out[i] = ev.Type
	}
	return out
}

const whole, resting = 0, 1

func TestAListHoldsOnlyTheWholeStream(t *testing.T) {
	f := newMergedFixture(t)
	assert.Equal(t, 1, f.lists, "the owner hears of each list: what rested meanwhile is for it to sweep")
	w, err := f.merged.WatchWithContext(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()
	assert.Equal(t, []string{"10"}, f.whole.watchRVs)
	assert.Equal(t, []string{"11"}, f.resting.watchRVs, "the resting stream is watched from its own version")
}

func TestMergedEvents(t *testing.T) {
	tests := []struct {
		name   string
		events []streamEvent
		want   []watch.EventType
	}{
		{name: "an object that comes to rest leaves the cache", events: []streamEvent{
			on(whole, watch.Deleted, object("a", "uid-a", "20")), on(resting, watch.Added, object("a", "uid-a", "20"))},
			want: []watch.EventType{watch.Deleted}},
		{name: "in either order", events: []streamEvent{
			on(resting, watch.Added, object("a", "uid-a", "20")), on(whole, watch.Deleted, object("a", "uid-a", "20"))},
			want: []watch.EventType{watch.Deleted}},
		{name: "a resting object that changes comes into the cache, and goes when deleted", events: []streamEvent{
			on(resting, watch.Modified, object("b", "uid-b", "20")), on(resting, watch.Modified, object("b", "uid-b", "21")),
			on(resting, watch.Deleted, object("b", "uid-b", "22"))},
			want: []watch.EventType{watch.Added, watch.Modified, watch.Deleted}},
		{name: "woken: the whole stream's state replaces it", events: []streamEvent{
			on(resting, watch.Modified, object("b", "uid-b", "20")), on(whole, watch.Added, object("b", "uid-b", "21")),
			on(resting, watch.Deleted, object("b", "uid-b", "21"))},
			want: []watch.EventType{watch.Added, watch.Modified}},
		{name: "woken, the resting stream first", events: []streamEvent{
			on(resting, watch.Modified, object("b", "uid-b", "20")), on(resting, watch.Deleted, object("b", "uid-b", "21")),
			on(whole, watch.Added, object("b", "uid-b", "21"))},
			want: []watch.EventType{watch.Added, watch.Deleted, watch.Added}},
		{name: "a stale state is dropped", events: []streamEvent{
			on(resting, watch.Modified, object("a", "uid-a", "20")), on(whole, watch.Modified, object("a", "uid-a", "15"))},
			want: []watch.EventType{watch.Modified}},
		{name: "a resting object deleted unseen is nothing to the cache", events: []streamEvent{
			on(resting, watch.Deleted, object("c", "uid-c", "20"))}},
		{name: "an object of the same name made again is another", events: []streamEvent{
			on(whole, watch.Deleted, object("a", "uid-a", "20")), on(whole, watch.Added, object("a", "uid-a2", "21")),
			on(resting, watch.Deleted, object("a", "uid-a", "22"))},
			want: []watch.EventType{watch.Deleted, watch.Added}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newMergedFixture(t)
			got := eventTypes(f.handle(tt.events...))
			if len(tt.want) == 0 {
				assert.Empty(t, got)
				return
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestEachStreamResumesFromItsOwnResourceVersion(t *testing.T) {
	f := newMergedFixture(t)
	w, err := f.merged.WatchWithContext(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	f.whole.last().Add(object("c", "uid-c", "30"))
	select {
	case ev := <-w.ResultChan():
		assert.Equal(t, watch.Added, ev.Type)
	case <-time.After(5 * time.Second):
		require.FailNow(t, "no event")
	}
	f.resting.last().Action(watch.Bookmark, object("", "", "31"))
	require.Eventually(t, func() bool {
		f.merged.mu.Lock()
		defer f.merged.mu.Unlock()
		return f.merged.rvs[1] == "31"
	}, 5*time.Second, time.Millisecond, "a bookmark moves its stream's resource version")
	f.whole.last().Stop() // the server ends one stream's watch
	for range w.ResultChan() {
	}

	w, err = f.merged.WatchWithContext(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()
	assert.Equal(t, []string{"10", "30"}, f.whole.watchRVs)
	assert.Equal(t, []string{"11", "31"}, f.resting.watchRVs)
}

// The merged streams feed a real informer: what rests leaves its store, what changes at
// rest comes back.
func TestAnInformerOfMergedStreamsHoldsWhatCanAct(t *testing.T) {
	f := &mergedFixture{
		whole:   &fakeStream{listRV: "10", items: []corev1.ConfigMap{*object("a", "uid-a", "5")}},
		resting: &fakeStream{listRV: "10"},
	}
	informer := cache.NewSharedIndexInformer(NewMerged(nil, f.whole, f.resting), &corev1.ConfigMap{}, 0, cache.Indexers{})
	go informer.RunWithContext(t.Context())
	require.True(t, cache.WaitForCacheSync(t.Context().Done(), informer.HasSynced))
	require.Eventually(t, func() bool { return f.whole.started() > 0 && f.resting.started() > 0 }, 5*time.Second, time.Millisecond)
	has := func(rv string) func() bool {
		return func() bool {
			obj, exists, _ := informer.GetStore().GetByKey("ns/a")
			if rv == "" {
				return !exists
			}
			return exists && obj.(*corev1.ConfigMap).ResourceVersion == rv
		}
	}

	f.whole.last().Delete(object("a", "uid-a", "20")) // it rests
	f.resting.last().Add(object("a", "uid-a", "20"))
	require.Eventually(t, has(""), 5*time.Second, time.Millisecond, "what rests leaves the store")

	f.resting.last().Modify(object("a", "uid-a", "21")) // deleted at rest, say
	require.Eventually(t, has("21"), 5*time.Second, time.Millisecond, "what changes at rest comes back")

	f.whole.last().Add(object("a", "uid-a", "22")) // woken
	f.resting.last().Delete(object("a", "uid-a", "22"))
	require.Eventually(t, has("22"), 5*time.Second, time.Millisecond)
}
