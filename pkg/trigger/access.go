package trigger

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// DefaultAccessTTL is how long the answer to "may this trigger's ServiceAccount list and
// watch its kind" is kept before it is asked again.
const DefaultAccessTTL = time.Minute

// accessChecker tells whether a trigger may act: whether its ServiceAccount may list and
// watch the trigger's kind, in the trigger's namespace for a namespaced kind, cluster-wide
// for a cluster-scoped one.
//
// The operator watches each kind once, with its own identity, for every trigger; a trigger
// sees what that watch holds only while a SubjectAccessReview says its ServiceAccount may
// list AND watch the kind in that scope. This equals watching as the ServiceAccount:
// authorization of list and watch depends only on the verb, the resource and the namespace
// (RBAC has no rule on labels or on single objects for them), so a ServiceAccount allowed
// both would see every object the shared watch sees in that scope, and one that is not
// allowed would see none. The review names no object: it answers for every name, so a
// ServiceAccount whose list rights are restricted to resourceNames is denied, as a list
// of the whole kind would be. The answer is kept for the TTL, and asked again when it
// expires (the trigger is looked at again then, so that rights taken away stop it within
// the TTL), when the trigger changes (a new generation, ServiceAccount or kind), and when
// RBAC changes (a Role, ClusterRole or binding: see Controller.onAccessChange): for the
// triggers whose ServiceAccount the change names, so that rights given or taken away count
// within a second; for every trigger when the change cannot be attributed, at most once
// per globalAccessChangeInterval.
type accessChecker struct {
	kube  kubernetes.Interface
	clock clock.PassiveClock
	ttl   time.Duration

	mu      sync.Mutex
	entries map[cache.ObjectName]accessEntry
	// seq counts the invalidations. An answer is stale when it was asked (accessEntry.asked)
	// before the last invalidation of every answer (globalAt) or of its trigger's (keyAt):
	// an invalidation during a review makes the next check ask again.
	seq      uint64
	globalAt uint64
	keyAt    map[cache.ObjectName]uint64
	// lastGlobal is when every answer was last made stale; pendingGlobal, when not zero,
	// is when they will be again, for the changes since (see invalidateAll).
	lastGlobal, pendingGlobal time.Time
}

// accessAnswer is what the review said, and until when it holds.
type accessAnswer struct {
	allowed bool
	// message says what is denied.
	message string
	expires time.Time
}

// accessEntry is a kept answer and the question it answers.
type accessEntry struct {
	uid            types.UID
	generation     int64
	asked          uint64
	serviceAccount string
	target         target
	answer         accessAnswer
}

func newAccessChecker(kube kubernetes.Interface, clk clock.PassiveClock, ttl time.Duration) *accessChecker {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if ttl <= 0 {
		ttl = DefaultAccessTTL
	}
	return &accessChecker{kube: kube, clock: clk, ttl: ttl, entries: map[cache.ObjectName]accessEntry{},
		keyAt: map[cache.ObjectName]uint64{}}
}

// serviceAccountOf is the ServiceAccount a trigger acts as.
func serviceAccountOf(trig *v1alpha1.PipelineTrigger) string {
	if trig.Spec.ServiceAccountName == "" {
		return "default"
	}
	return trig.Spec.ServiceAccountName
}

// serviceAccountUser is the user name the API server gives the ServiceAccount ns/sa.
func serviceAccountUser(ns, sa string) string { return "system:serviceaccount:" + ns + ":" + sa }

// serviceAccountGroups are the groups the API server gives every ServiceAccount token of
// namespace ns.
func serviceAccountGroups(ns string) []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
}

// check answers from the kept answer when it still holds, else asks the API server. An
// error (the review could not be made) is not kept. While every answer is due to be made
// stale (invalidateAll), the answer says it expires then, so that the trigger is looked at
// again at that time.
func (a *accessChecker) check(ctx context.Context, trig *v1alpha1.PipelineTrigger, t target) (accessAnswer, error) {
	key := cache.MetaObjectToName(trig)
	sa := serviceAccountOf(trig)
	now := a.clock.Now()
	a.mu.Lock()
	a.applyPendingLocked(now)
	e, ok := a.entries[key]
	fresh := ok && e.asked >= a.globalAt && e.asked >= a.keyAt[key]
	asked, pending := a.seq, a.pendingGlobal
	a.mu.Unlock()
	if fresh && e.uid == trig.UID && e.generation == trig.Generation && e.serviceAccount == sa &&
		e.target == t && now.Before(e.answer.expires) {
		return expiringBy(e.answer, pending), nil
	}

	namespace := ""
	if t.namespaced {
		namespace = trig.Namespace
	}
	var denied []string
	for _, verb := range []string{"list", "watch"} {
		allowed, err := a.review(ctx, trig.Namespace, sa, authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: verb, Group: t.gvr.Group, Version: t.gvr.Version, Resource: t.gvr.Resource,
		})
		if err != nil {
			return accessAnswer{}, err
		}
		if !allowed {
			denied = append(denied, verb)
		}
	}
	answer := accessAnswer{allowed: len(denied) == 0, expires: now.Add(a.ttl)}
	if !answer.allowed {
		scope := "cluster-wide"
		if t.namespaced {
			scope = "in namespace " + trig.Namespace
		}
		answer.message = fmt.Sprintf("ServiceAccount %s/%s may not %s %s %s", trig.Namespace, sa, strings.Join(denied, " and "),
			t.gvr.GroupResource(), scope)
	}
	if ref := trig.Spec.NodeBudgetRef; ref != nil && answer.allowed {
		// A budget is its owner's to give: naming it takes the verb "use" on it.
		budgets := v1alpha1.Resource("nodebudgets")
		allowed, err := a.review(ctx, trig.Namespace, sa, authorizationv1.ResourceAttributes{
			Verb: v1alpha1.VerbUse, Group: budgets.Group, Version: v1alpha1.SchemeGroupVersion.Version, Resource: budgets.Resource, Name: ref.Name,
		})
		if err != nil {
			return accessAnswer{}, err
		}
		if !allowed {
			answer.allowed = false
			answer.message = fmt.Sprintf("ServiceAccount %s/%s may not use NodeBudget %s (verb %q on %s)", trig.Namespace, sa, ref.Name,
				v1alpha1.VerbUse, budgets)
		}
	}
	a.mu.Lock()
	// Kept as asked before the review: a change during the review makes the next check
	// ask again.
	a.entries[key] = accessEntry{uid: trig.UID, generation: trig.Generation, asked: asked, serviceAccount: sa, target: t, answer: answer}
	pending = a.pendingGlobal
	a.mu.Unlock()
	return expiringBy(answer, pending), nil
}

// expiringBy is the answer, expiring at the latest at t when t is not zero.
func expiringBy(answer accessAnswer, t time.Time) accessAnswer {
	if !t.IsZero() && t.Before(answer.expires) {
		answer.expires = t
	}
	return answer
}

// review asks whether the ServiceAccount saNamespace/sa may do what attrs say, as the API
// server would authorize its request: with the groups the API server gives every
// ServiceAccount token.
func (a *accessChecker) review(ctx context.Context, saNamespace, sa string, attrs authorizationv1.ResourceAttributes) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               serviceAccountUser(saNamespace, sa),
		Groups:             serviceAccountGroups(saNamespace),
		ResourceAttributes: &attrs,
	}}
	got, err := a.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		what := schema.GroupResource{Group: attrs.Group, Resource: attrs.Resource}.String()
		return false, fmt.Errorf("review whether ServiceAccount %s/%s may %s %s: %w", saNamespace, sa, attrs.Verb, what, err)
	}
	return got.Status.Allowed && !got.Status.Denied, nil
}

// invalidateKeys makes the kept answers of the triggers keys stale: an RBAC change named
// their ServiceAccounts.
func (a *accessChecker) invalidateKeys(keys []cache.ObjectName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	for _, key := range keys {
		a.keyAt[key] = a.seq
	}
}

// invalidateAll makes every kept answer stale, for an RBAC change that could not be
// attributed, at most once per globalAccessChangeInterval: each time costs two reviews
// for every trigger, and whoever may edit RBAC somewhere can make changes at will. The
// first change makes the answers stale at once; a change within the interval after is
// covered by a run when the interval is over (so the last change of a burst is never
// lost), which the first check after that time makes (no timer runs). It returns after
// how long the triggers should be looked at again, and false when a run due later covers
// this change already. A trigger queued sooner for another reason (the workqueue keeps
// the sooner of two delays) is told by check to be looked at again when the run is due.
func (a *accessChecker) invalidateAll() (time.Duration, bool) {
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.applyPendingLocked(now)
	switch {
	case !a.pendingGlobal.IsZero():
		return 0, false
	case a.lastGlobal.IsZero() || !now.Before(a.lastGlobal.Add(globalAccessChangeInterval)):
		a.invalidateAllLocked(now)
		return 0, true
	}
	a.pendingGlobal = a.lastGlobal.Add(globalAccessChangeInterval)
	return a.pendingGlobal.Sub(now), true
}

// applyPendingLocked runs the pending invalidation of every answer once it is due.
func (a *accessChecker) applyPendingLocked(now time.Time) {
	if !a.pendingGlobal.IsZero() && !now.Before(a.pendingGlobal) {
		a.invalidateAllLocked(a.pendingGlobal)
		a.pendingGlobal = time.Time{}
	}
}

func (a *accessChecker) invalidateAllLocked(at time.Time) {
	a.seq++
	a.globalAt = a.seq
	clear(a.keyAt) // older than globalAt: they say nothing more
	a.lastGlobal = at
}

// forgetKey drops the answer kept for a trigger that is gone.
func (a *accessChecker) forgetKey(key cache.ObjectName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.entries, key)
	delete(a.keyAt, key)
}
