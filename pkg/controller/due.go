package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// dueCalls remembers when each hook that is not done asked to be called again. A sync
// comes earlier than that whenever the pipeline changes, first of all through the
// engine's own status write, which comes back through the informer at once: without this
// the hook was called again within milliseconds, twice per interval it asked for. It is
// memory only: after a restart, the step's status.pollInterval (what the hook asked,
// written only when that changes) makes the first call wait as long again, never sooner
// than asked. Safe for concurrent use.
type dueCalls struct {
	mu        sync.Mutex
	due       map[dueKey]time.Time
	lastSweep time.Time
}

// dueKey names one attempt of one hook of one step: the attempt's number and start tell
// a later attempt, or a later run of the same step, from it.
type dueKey struct {
	pipeline types.UID
	step     string
	hook     v1alpha1.Hook
	attempt  int32
	started  time.Time
}

// dueSweepEvery is how often set drops entries long overdue: a hook called since, or a
// pipeline gone.
const dueSweepEvery = time.Minute

func newDueCalls() *dueCalls { return &dueCalls{due: map[dueKey]time.Time{}} }

func dueKeyOf(p *v1alpha1.Pipeline, s *v1alpha1.StepStatus) dueKey {
	k := dueKey{pipeline: p.UID, step: s.Name, hook: s.Hook, attempt: s.Attempts}
	if s.HookStartTime != nil {
		// As the API keeps it: to the second. The sync after the one that set it reads it
		// back from the API server.
		k.started = s.HookStartTime.Rfc3339Copy().Time
	}
	return k
}

// set records that the attempt k is due at.
func (d *dueCalls) set(k dueKey, at, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.due[k] = at
	if now.Sub(d.lastSweep) < dueSweepEvery {
		return
	}
	d.lastSweep = now
	for key, t := range d.due {
		if now.Sub(t) > dueSweepEvery {
			delete(d.due, key)
		}
	}
}

// early is how long before the attempt k is due now is; 0 when it is due, or unknown.
func (d *dueCalls) early(k dueKey, now time.Time) time.Duration {
	wait, _ := d.lookup(k, now)
	return wait
}

// lookup is early, and whether the attempt k is known at all: an attempt due now is
// forgotten, and known this once.
func (d *dueCalls) lookup(k dueKey, now time.Time) (time.Duration, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.due[k]
	if !ok {
		return 0, false
	}
	if wait := at.Sub(now); wait > 0 {
		return wait, true
	}
	delete(d.due, k)
	return 0, true
}

// len is how many attempts it remembers.
func (d *dueCalls) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.due)
}
