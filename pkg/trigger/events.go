package trigger

import (
	"time"

	"fmt"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// memory is what a trigger's syncs remember between them, so that an Event is recorded
// once rather than at every sync. It is lost when the operator restarts, which records
// those Events once more.
type memory struct {
	// waiting are the objects whose Waiting Event was recorded, while they wait.
	waiting map[types.UID]bool
	// held are the holds whose Waiting Event was recorded, while they hold objects back.
	held map[hold]bool
	// changed are the pipelines whose "immutable" ObjectChanged Event was recorded, with
	// the digest of the params it was for.
	changed map[types.UID]string
	// deleted are the pipelines we deleted, until the cache sees them being deleted.
	deleted map[types.UID]bool
	// gatesClosedAt is when the health gates were last found closed (zero: they held),
	// at the trigger's generation gatesGeneration: they are not checked again before
	// gateRecheck.
	gatesClosedAt   time.Time
	gatesGeneration int64
}

// memoryOf returns the memory of a trigger, made on first use.
func (c *Controller) memoryOf(key cache.ObjectName) *memory {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.memories[key]
	if !ok {
		m = &memory{waiting: map[types.UID]bool{}, held: map[hold]bool{}, changed: map[types.UID]string{}, deleted: map[types.UID]bool{}}
		c.memories[key] = m
	}
	return m
}

// forget drops what the controller keeps for a trigger that is gone.
func (c *Controller) forget(key cache.ObjectName) {
	c.mu.Lock()
	delete(c.memories, key)
	c.mu.Unlock()
	c.access.answers.Forget(key)
	c.objects.Unwatch(key)
}

// prune forgets what no longer is: objects that no longer wait, pipelines that are gone
// or being deleted.
func (m *memory) prune(ts *triggerSync) {
	waiting := map[types.UID]bool{}
	for _, obj := range ts.waiting {
		waiting[obj.GetUID()] = true
	}
	for uid := range m.waiting {
		if !waiting[uid] {
			delete(m.waiting, uid)
		}
	}
	for h := range m.held {
		if !ts.held[h] {
			delete(m.held, h)
		}
	}
	live := map[types.UID]bool{}
	for _, p := range ts.pipelines {
		if p.DeletionTimestamp == nil {
			live[p.UID] = true
		}
	}
	for uid := range m.changed {
		if !live[uid] {
			delete(m.changed, uid)
		}
	}
	for uid := range m.deleted {
		if !live[uid] {
			delete(m.deleted, uid)
		}
	}
}

// event records an Event on the trigger.
func (ts *triggerSync) event(eventType, reason, format string, args ...any) {
	if ts.c.recorder != nil {
		ts.c.recorder.Event(ts.trig, eventType, reason, fmt.Sprintf(format, args...))
	}
}

// reportHeld records that objects wait for h, first the object named first, once while it
// holds: the status' blockedBy says it for as long as it lasts.
func (ts *triggerSync) reportHeld(h hold, unfinished int, first string) {
	if ts.held == nil {
		ts.held = map[hold]bool{}
	}
	ts.held[h] = true
	if ts.mem.held[h] {
		return
	}
	ts.mem.held[h] = true
	ts.recordHeld(h, unfinished, first)
}

// waitingEvent records a Waiting Event of objects held back.
func (ts *triggerSync) waitingEvent(format string, args ...any) {
	ts.event(corev1.EventTypeNormal, v1alpha1.TriggerReasonWaiting, format, args...)
}

// reportWaiting records that an object waits, once while it waits.
func (ts *triggerSync) reportWaiting(obj *unstructured.Unstructured, eventType, format string, args ...any) {
	if ts.mem.waiting[obj.GetUID()] {
		return
	}
	ts.mem.waiting[obj.GetUID()] = true
	ts.event(eventType, v1alpha1.TriggerReasonWaiting, format, args...)
}
