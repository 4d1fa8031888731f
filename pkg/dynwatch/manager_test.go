package dynwatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func configMap(ns, name, resourceVersion string, data map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": data}}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetResourceVersion(resourceVersion)
	return u
}

// TestEventsQueueTheWatchersOfTheKind: a change queues the watchers of the object's kind,
// of a namespaced kind those of its namespace only; a resync, or a change of the
// resourceVersion alone (the informer's transform dropped what changed: a Node's
// heartbeat), queues none.
func TestEventsQueueTheWatchersOfTheKind(t *testing.T) {
	var queued []cache.ObjectName
	m := New(Config{Clock: clocktesting.NewFakeClock(time.Now()), Enqueue: func(key cache.ObjectName) { queued = append(queued, key) }})
	inNS := cache.ObjectName{Namespace: "ns", Name: "a"}
	inOther := cache.ObjectName{Namespace: "other", Name: "b"}
	m.watchers[configMaps] = map[cache.ObjectName]bool{inNS: true, inOther: true}
	for _, key := range []cache.ObjectName{inNS, inOther} {
		m.watching[key] = watched{Kind: Kind{GVR: configMaps, Namespaced: true}}
	}
	h := m.handler(configMaps)

	before := configMap("ns", "cm", "7", map[string]any{"k": "v"})
	tests := []struct {
		name   string
		event  func()
		queued []cache.ObjectName
	}{
		{"an object added queues the watchers of its namespace", func() { h.OnAdd(before, false) }, []cache.ObjectName{inNS}},
		{"a resync queues none", func() { h.OnUpdate(before, before.DeepCopy()) }, nil},
		{"a change of the resourceVersion alone queues none",
			func() { h.OnUpdate(before, configMap("ns", "cm", "8", map[string]any{"k": "v"})) }, nil},
		{"a change queues", func() { h.OnUpdate(before, configMap("ns", "cm", "8", map[string]any{"k": "w"})) }, []cache.ObjectName{inNS}},
		{"a deletion's tombstone queues", func() { h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/cm", Obj: before}) }, []cache.ObjectName{inNS}},
		{"another namespace's object", func() { h.OnAdd(configMap("other", "cm", "1", nil), false) }, []cache.ObjectName{inOther}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			queued = nil
			tt.event()
			assert.Equal(t, tt.queued, queued)
		})
	}
}

// TestWatchBeforeRunFails: no informer starts before Run gives it a stop channel.
func TestWatchBeforeRunFails(t *testing.T) {
	m := New(Config{Clock: clocktesting.NewFakeClock(time.Now()), Enqueue: func(cache.ObjectName) {}})
	_, _, err := m.Watch(cache.ObjectName{Name: "a"}, Kind{GVR: configMaps}, nil)
	assert.ErrorContains(t, err, "not running")
	assert.Nil(t, m.Informer(configMaps))
}
