package trigger

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// RBAC changes (a Role, ClusterRole or binding: see Controller.onAccessChange), so that
// rights given or taken away count within a second.
type accessChecker struct {
	kube  kubernetes.Interface
	clock clock.PassiveClock
	ttl   time.Duration

	mu      sync.Mutex
	entries map[cache.ObjectName]accessEntry
	// epoch counts the RBAC changes seen; an answer given in an earlier epoch is asked
	// again.
	epoch uint64
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
	epoch          uint64
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
	return &accessChecker{kube: kube, clock: clk, ttl: ttl, entries: map[cache.ObjectName]accessEntry{}}
}

// serviceAccountOf is the ServiceAccount a trigger acts as.
func serviceAccountOf(trig *v1alpha1.PipelineTrigger) string {
	if trig.Spec.ServiceAccountName == "" {
		return "default"
	}
	return trig.Spec.ServiceAccountName
}

// check answers from the kept answer when it still holds, else asks the API server. An
// error (the review could not be made) is not kept.
func (a *accessChecker) check(ctx context.Context, trig *v1alpha1.PipelineTrigger, t target) (accessAnswer, error) {
	key := cache.MetaObjectToName(trig)
	sa := serviceAccountOf(trig)
	now := a.clock.Now()
	a.mu.Lock()
	e, ok := a.entries[key]
	epoch := a.epoch
	a.mu.Unlock()
	if ok && e.uid == trig.UID && e.generation == trig.Generation && e.epoch == epoch && e.serviceAccount == sa &&
		e.target == t && now.Before(e.answer.expires) {
		return e.answer, nil
	}

	namespace := ""
	if t.namespaced {
		namespace = trig.Namespace
	}
	var denied []string
	for _, verb := range []string{"list", "watch"} {
		allowed, err := a.review(ctx, trig.Namespace, sa, verb, namespace, t)
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
	a.mu.Lock()
	// Kept under the epoch the question was asked in: a change during the review makes
	// the next check ask again.
	a.entries[key] = accessEntry{uid: trig.UID, generation: trig.Generation, epoch: epoch, serviceAccount: sa, target: t, answer: answer}
	a.mu.Unlock()
	return answer, nil
}

// review asks whether the ServiceAccount saNamespace/sa may verb the target's resource in
// namespace (empty: cluster-wide), as the API server would authorize its request: with the
// groups the API server gives every ServiceAccount token.
func (a *accessChecker) review(ctx context.Context, saNamespace, sa, verb, namespace string, t target) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + saNamespace + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + saNamespace, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: verb, Group: t.gvr.Group, Version: t.gvr.Version, Resource: t.gvr.Resource,
		},
	}}
	got, err := a.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("review whether ServiceAccount %s/%s may %s %s: %w", saNamespace, sa, verb, t.gvr.GroupResource(), err)
	}
	return got.Status.Allowed && !got.Status.Denied, nil
}

// invalidate makes every kept answer stale: RBAC changed.
func (a *accessChecker) invalidate() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.epoch++
}

// forgetKey drops the answer kept for a trigger that is gone.
func (a *accessChecker) forgetKey(key cache.ObjectName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.entries, key)
}
