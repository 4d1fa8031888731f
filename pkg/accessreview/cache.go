// Package accessreview answers whether a tenant's ServiceAccount may do what an object of
// the tenant asks the operator to do for it, with SubjectAccessReviews made as that
// ServiceAccount; keeps each answer for a TTL; and makes answers stale when RBAC changes:
// at once those of the ServiceAccounts a change names (Bindings.Attribute), every answer,
// rate-limited, for a change it cannot attribute.
package accessreview

import (
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// DefaultTTL is how long an answer is kept before it is asked again.
const DefaultTTL = time.Minute

// UnattributedInterval bounds how often an RBAC change that cannot be attributed makes
// every answer stale (Cache.InvalidateAll).
const UnattributedInterval = 5 * time.Second

// Answer is what the reviews said, and until when it holds.
type Answer struct {
	Allowed bool
	// Message says what is denied.
	Message string
	Expires time.Time
}

// Cache keeps, for each object asking (its key), the answer to its last question Q: what it
// asked, of which version of the object, as which ServiceAccount.
type Cache[Q comparable] struct {
	clock clock.PassiveClock
	ttl   time.Duration

	mu      sync.Mutex
	entries map[cache.ObjectName]entry[Q]
	// seq counts the invalidations. An answer is stale when it was asked (entry.asked)
	// before the last invalidation of every answer (globalAt) or of its key's (keyAt): an
	// invalidation during a review makes the next check ask again.
	seq      uint64
	globalAt uint64
	keyAt    map[cache.ObjectName]uint64
	// lastGlobal is when every answer was last made stale; pendingGlobal, when not zero,
	// is when they will be again, for the changes since (see InvalidateAll).
	lastGlobal, pendingGlobal time.Time
}

// entry is a kept answer and the question it answers.
type entry[Q comparable] struct {
	question Q
	asked    uint64
	answer   Answer
}

// NewCache returns a cache whose answers hold for ttl (0: DefaultTTL).
func NewCache[Q comparable](clk clock.PassiveClock, ttl time.Duration) *Cache[Q] {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Cache[Q]{clock: clk, ttl: ttl, entries: map[cache.ObjectName]entry[Q]{}, keyAt: map[cache.ObjectName]uint64{}}
}

// Check answers question for key from the kept answer while it holds, else with ask, whose
// answer it keeps for the TTL. An error (the review could not be made) is not kept. While
// every answer is due to be made stale (InvalidateAll), the answer says it expires then,
// so that the object is looked at again at that time.
func (c *Cache[Q]) Check(key cache.ObjectName, question Q, ask func() (allowed bool, message string, err error)) (Answer, error) {
	now := c.clock.Now()
	c.mu.Lock()
	c.applyPendingLocked(now)
	e, ok := c.entries[key]
	fresh := ok && e.asked >= c.globalAt && e.asked >= c.keyAt[key]
	asked, pending := c.seq, c.pendingGlobal
	c.mu.Unlock()
	if fresh && e.question == question && now.Before(e.answer.Expires) {
		return expiringBy(e.answer, pending), nil
	}
	allowed, message, err := ask()
	if err != nil {
		return Answer{}, err
	}
	answer := Answer{Allowed: allowed, Message: message, Expires: now.Add(c.ttl)}
	c.mu.Lock()
	// Kept as asked before the review: a change during the review makes the next check
	// ask again.
	c.entries[key] = entry[Q]{question: question, asked: asked, answer: answer}
	pending = c.pendingGlobal
	c.mu.Unlock()
	return expiringBy(answer, pending), nil
}

// Kept returns the last answer kept for key, expired or stale, and the question it
// answered.
func (c *Cache[Q]) Kept(key cache.ObjectName) (Q, Answer, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	return e.question, e.answer, ok
}

// Len is how many answers are kept.
func (c *Cache[Q]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Invalidations counts the invalidations so far, of some answers or all.
func (c *Cache[Q]) Invalidations() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq
}

// expiringBy is the answer, expiring at the latest at t when t is not zero.
func expiringBy(answer Answer, t time.Time) Answer {
	if !t.IsZero() && t.Before(answer.Expires) {
		answer.Expires = t
	}
	return answer
}

// InvalidateKeys makes the kept answers of keys stale: an RBAC change named their
// ServiceAccounts.
func (c *Cache[Q]) InvalidateKeys(keys []cache.ObjectName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	for _, key := range keys {
		c.keyAt[key] = c.seq
	}
}

// InvalidateAll makes every kept answer stale, for an RBAC change that could not be
// attributed, at most once per UnattributedInterval: each time costs the reviews of every
// object, and whoever may edit RBAC somewhere can make changes at will. The first change
// makes the answers stale at once; a change within the interval after is covered by a run
// when the interval is over (so the last change of a burst is never lost), which the first
// check after that time makes (no timer runs). It returns after how long the objects
// should be looked at again, and false when a run due later covers this change already.
// An object queued sooner for another reason (a workqueue keeps the sooner of two delays)
// is told by Check to be looked at again when the run is due.
func (c *Cache[Q]) InvalidateAll() (time.Duration, bool) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applyPendingLocked(now)
	switch {
	case !c.pendingGlobal.IsZero():
		return 0, false
	case c.lastGlobal.IsZero() || !now.Before(c.lastGlobal.Add(UnattributedInterval)):
		c.invalidateAllLocked(now)
		return 0, true
	}
	c.pendingGlobal = c.lastGlobal.Add(UnattributedInterval)
	return c.pendingGlobal.Sub(now), true
}

// applyPendingLocked runs the pending invalidation of every answer once it is due.
func (c *Cache[Q]) applyPendingLocked(now time.Time) {
	if !c.pendingGlobal.IsZero() && !now.Before(c.pendingGlobal) {
		c.invalidateAllLocked(c.pendingGlobal)
		c.pendingGlobal = time.Time{}
	}
}

func (c *Cache[Q]) invalidateAllLocked(at time.Time) {
	c.seq++
	c.globalAt = c.seq
	clear(c.keyAt) // older than globalAt: they say nothing more
	c.lastGlobal = at
}

// Forget drops the answer kept for an object that is gone.
func (c *Cache[Q]) Forget(key cache.ObjectName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, key)
	delete(c.keyAt, key)
}
