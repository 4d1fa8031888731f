package lenient

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

func object(name, uid, rv string, deleting bool) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), ResourceVersion: rv}}
	if deleting {
		now := metav1.Now()
		cm.DeletionTimestamp = &now
	}
	return cm
}

// existence answers Exists from a map the test sets, counting the calls.
type existence struct {
	mu    sync.Mutex
	uids  map[string]types.UID
	calls int
}

func (e *existence) exists(_ context.Context, namespace, name string) (types.UID, bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls++
	uid, ok := e.uids[namespace+"/"+name]
	return uid, ok, nil
}

func (e *existence) set(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if uid == "" {
		delete(e.uids, key)
		return
	}
	e.uids[key] = uid
}

func (e *existence) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls
}

type mergedFixture struct {
	whole, resting *fakeStream
	exist          *existence
	merged         *Merged
	w              watch.Interface
}

func newMergedFixture(t *testing.T) *mergedFixture {
	t.Helper()
	f := &mergedFixture{
		whole:   &fakeStream{listRV: "10", items: []corev1.ConfigMap{*object("a", "uid-a", "5", false)}},
		resting: &fakeStream{listRV: "11", items: []corev1.ConfigMap{*object("b", "uid-b", "7", false)}},
		exist:   &existence{uids: map[string]types.UID{"ns/a": "uid-a", "ns/b": "uid-b"}},
	}
	f.merged = NewMerged(MergedConfig{
		Deleted:    func(obj metav1.Object, stream int) bool { return stream == 0 && obj.GetDeletionTimestamp() != nil },
		Exists:     f.exist.exists,
		CheckAfter: 10 * time.Millisecond,
	}, f.whole, f.resting)
	list, err := f.merged.ListWithContext(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.(*metav1.List).Items, 2)
	f.watch(t)
	return f
}

func (f *mergedFixture) watch(t *testing.T) {
	t.Helper()
	w, err := f.merged.WatchWithContext(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	f.w = w
	t.Cleanup(w.Stop)
}

// next is the next merged event, or fails after a second.
func (f *mergedFixture) next(t *testing.T) watch.Event {
	t.Helper()
	select {
	case ev := <-f.w.ResultChan():
		return ev
	case <-time.After(time.Second):
		require.FailNow(t, "no event")
		return watch.Event{}
	}
}

// nothing asserts that no event comes for a while (a held DELETED is checked after 10 ms).
func (f *mergedFixture) nothing(t *testing.T) {
	t.Helper()
	select {
	case ev := <-f.w.ResultChan():
		assert.Fail(t, "unexpected event", "%s %v", ev.Type, ev.Object)
	case <-time.After(100 * time.Millisecond):
	}
}

// The order of two streams' events is the order they reach the merging loop: handle is
// called directly, in each order.
func TestAMoveBetweenStreamsIsOneModification(t *testing.T) {
	tests := []struct {
		name        string
		deleteFirst bool
	}{
		{name: "the old stream's DELETED first", deleteFirst: true},
		{name: "the new stream's ADDED first"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newMergedFixture(t)
			f.merged.cfg.CheckAfter = time.Hour // no read decides it
			mw := &mergedWatch{m: f.merged, out: make(chan watch.Event, 10), done: make(chan struct{}),
				checked: make(chan checkResult), pending: map[string]heldDeletion{}}
			defer close(mw.done)
			moved := object("a", "uid-a", "20", false)
			deleted, added := watch.Event{Type: watch.Deleted, Object: moved}, watch.Event{Type: watch.Added, Object: moved}
			if tt.deleteFirst {
				mw.handle(t.Context(), 0, deleted)
				assert.Empty(t, mw.out, "held")
				mw.handle(t.Context(), 1, added)
			} else {
				mw.handle(t.Context(), 1, added)
				mw.handle(t.Context(), 0, deleted)
			}
			require.Len(t, mw.out, 1)
			ev := <-mw.out
			assert.Equal(t, watch.Modified, ev.Type, "the object stays in the cache")
			assert.Equal(t, "20", ev.Object.(*corev1.ConfigMap).ResourceVersion)
			assert.Empty(t, mw.pending)
		})
	}
}

func TestADeletionIsDelivered(t *testing.T) {
	t.Run("certainly: a pipeline being deleted never rests", func(t *testing.T) {
		f := newMergedFixture(t)
		f.whole.last().Delete(object("a", "uid-a", "20", true))
		assert.Equal(t, watch.Deleted, f.next(t).Type)
		assert.Zero(t, f.exist.count(), "no read")
	})
	t.Run("after a read says it is gone", func(t *testing.T) {
		f := newMergedFixture(t)
		f.exist.set("ns/b", "")
		f.resting.last().Delete(object("b", "uid-b", "20", false))
		ev := f.next(t)
		assert.Equal(t, watch.Deleted, ev.Type)
		assert.Equal(t, "b", ev.Object.(*corev1.ConfigMap).Name)
		assert.Equal(t, 1, f.exist.count())
	})
	t.Run("after a read finds another object of that name", func(t *testing.T) {
		f := newMergedFixture(t)
		f.exist.set("ns/b", "uid-b2")
		f.resting.last().Delete(object("b", "uid-b", "20", false))
		assert.Equal(t, watch.Deleted, f.next(t).Type)
	})
	t.Run("not while the read finds it: it moved", func(t *testing.T) {
		f := newMergedFixture(t)
		f.resting.last().Delete(object("b", "uid-b", "20", false))
		f.nothing(t)
		assert.Equal(t, 1, f.exist.count())
		f.whole.last().Add(object("b", "uid-b", "20", false))
		assert.Equal(t, watch.Modified, f.next(t).Type)
	})
}

func TestAStaleStateIsDropped(t *testing.T) {
	f := newMergedFixture(t)
	f.resting.last().Add(object("a", "uid-a", "20", false)) // moved
	assert.Equal(t, watch.Modified, f.next(t).Type)
	f.whole.last().Modify(object("a", "uid-a", "15", false)) // the old stream, late
	f.whole.last().Delete(object("a", "uid-a", "20", false))
	f.nothing(t)
	assert.Zero(t, f.exist.count())
}

func TestEachStreamResumesFromItsOwnResourceVersion(t *testing.T) {
	f := newMergedFixture(t)
	assert.Equal(t, []string{"10"}, f.whole.watchRVs)
	assert.Equal(t, []string{"11"}, f.resting.watchRVs)
	f.whole.last().Add(object("c", "uid-c", "30", false))
	assert.Equal(t, watch.Added, f.next(t).Type)
	f.resting.last().Action(watch.Bookmark, object("", "", "31", false))
	require.Eventually(t, func() bool {
		f.merged.mu.Lock()
		defer f.merged.mu.Unlock()
		return f.merged.rvs[1] == "31"
	}, 5*time.Second, time.Millisecond, "a bookmark moves its stream's resource version")
	f.whole.last().Stop() // the server ends one stream's watch
	_, open := <-f.w.ResultChan()
	require.False(t, open, "the merged watch ends with it")

	f.watch(t)
	assert.Equal(t, []string{"10", "30"}, f.whole.watchRVs)
	assert.Equal(t, []string{"11", "31"}, f.resting.watchRVs)
}

func TestAWatchThatEndsWhileADeletionIsHeldListsAgain(t *testing.T) {
	f := newMergedFixture(t)
	f.exist.set("ns/b", "")
	f.merged.cfg.CheckAfter = time.Hour
	f.resting.last().Delete(object("b", "uid-b", "20", false))
	f.nothing(t)
	f.whole.last().Stop()
	for range f.w.ResultChan() {
	}
	_, err := f.merged.WatchWithContext(t.Context(), metav1.ListOptions{})
	require.Error(t, err)
	assert.True(t, apierrors.IsResourceExpired(err), "the reflector lists again on an expired watch: %v", err)

	_, err = f.merged.ListWithContext(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	f.watch(t)
}

func TestAListKeepsTheNewerStateOfAnObjectThatMoved(t *testing.T) {
	f := &mergedFixture{
		whole:   &fakeStream{listRV: "10", items: []corev1.ConfigMap{*object("a", "uid-a", "5", false)}},
		resting: &fakeStream{listRV: "12", items: []corev1.ConfigMap{*object("a", "uid-a", "11", false)}},
	}
	m := NewMerged(MergedConfig{}, f.whole, f.resting)
	list, err := m.ListWithContext(t.Context(), metav1.ListOptions{Limit: 500})
	require.NoError(t, err)
	items := list.(*metav1.List).Items
	require.Len(t, items, 1)
	assert.Equal(t, "11", items[0].Object.(*corev1.ConfigMap).ResourceVersion)
	assert.Equal(t, "12", list.(*metav1.List).ResourceVersion)
}

// The merged streams feed a real informer: a move never shows a reader the object gone.
func TestAnInformerOfMergedStreamsNeverLosesAMovingObject(t *testing.T) {
	f := &mergedFixture{
		whole:   &fakeStream{listRV: "10", items: []corev1.ConfigMap{*object("a", "uid-a", "5", false)}},
		resting: &fakeStream{listRV: "10"},
		exist:   &existence{uids: map[string]types.UID{"ns/a": "uid-a"}},
	}
	m := NewMerged(MergedConfig{Exists: f.exist.exists, CheckAfter: 10 * time.Millisecond}, f.whole, f.resting)
	informer := cache.NewSharedIndexInformer(m, &corev1.ConfigMap{}, 0, cache.Indexers{})
	var mu sync.Mutex
	var deleted int
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(any) {
		mu.Lock()
		defer mu.Unlock()
		deleted++
	}})
	require.NoError(t, err)
	go informer.RunWithContext(t.Context())
	require.True(t, cache.WaitForCacheSync(t.Context().Done(), informer.HasSynced))
	require.Eventually(t, func() bool {
		f.whole.mu.Lock()
		defer f.whole.mu.Unlock()
		return len(f.whole.watches) > 0
	}, 5*time.Second, 5*time.Millisecond)

	for i := range 20 { // back and forth
		rv := 20 + i
		from, to := f.whole, f.resting
		if i%2 == 1 {
			from, to = to, from
		}
		moved := object("a", "uid-a", strconv.Itoa(rv), false)
		from.last().Delete(moved)
		to.last().Add(moved)
	}
	require.Eventually(t, func() bool {
		obj, exists, _ := informer.GetStore().GetByKey("ns/a")
		return exists && obj.(*corev1.ConfigMap).ResourceVersion == "39"
	}, 5*time.Second, 5*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	assert.Zero(t, deleted)
}
