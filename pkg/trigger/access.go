package trigger

import (
	"context"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/stepwise-dev/stepwise/pkg/accessreview"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// DefaultAccessTTL is how long the answer to "may this trigger's ServiceAccount list and
// watch its kind" is kept before it is asked again.
const DefaultAccessTTL = accessreview.DefaultTTL

// accessChecker tells whether a trigger may act: whether its ServiceAccount may list and
// watch the trigger's kind, in the trigger's namespace for a namespaced kind, cluster-wide
// for a cluster-scoped one, and use the NodeBudget it names.
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
// per accessreview.UnattributedInterval.
type accessChecker struct {
	kube    kubernetes.Interface
	answers *accessreview.Cache[accessQuestion]
}

// accessQuestion is what an answer answers: the trigger as it was (UID and generation),
// its ServiceAccount and its kind.
type accessQuestion struct {
	uid            types.UID
	generation     int64
	serviceAccount string
	target         target
}

func newAccessChecker(kube kubernetes.Interface, clk clock.PassiveClock, ttl time.Duration) *accessChecker {
	return &accessChecker{kube: kube, answers: accessreview.NewCache[accessQuestion](clk, ttl)}
}

// questionOf is what the trigger asks when it watches t.
func questionOf(trig *v1alpha1.PipelineTrigger, t target) accessQuestion {
	return accessQuestion{uid: trig.UID, generation: trig.Generation, serviceAccount: serviceAccountOf(trig).Name, target: t}
}

// serviceAccountOf is the ServiceAccount a trigger acts as.
func serviceAccountOf(trig *v1alpha1.PipelineTrigger) accessreview.ServiceAccount {
	name := trig.Spec.ServiceAccountName
	if name == "" {
		name = "default"
	}
	return accessreview.ServiceAccount{Namespace: trig.Namespace, Name: name}
}

// check answers whether the trigger may watch t, from the kept answer while it holds.
func (a *accessChecker) check(ctx context.Context, trig *v1alpha1.PipelineTrigger, t target) (accessreview.Answer, error) {
	return a.answers.Check(cache.MetaObjectToName(trig), questionOf(trig, t), func() (bool, string, error) {
		return a.ask(ctx, trig, t)
	})
}

// ask reviews whether the trigger's ServiceAccount may list and watch t, and then use the
// NodeBudget the trigger names, and says what it may not.
func (a *accessChecker) ask(ctx context.Context, trig *v1alpha1.PipelineTrigger, t target) (bool, string, error) {
	sa := serviceAccountOf(trig)
	namespace := ""
	if t.namespaced {
		namespace = trig.Namespace
	}
	var denied []string
	for _, verb := range []string{"list", "watch"} {
		allowed, err := accessreview.Review(ctx, a.kube, sa, authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: verb, Group: t.gvr.Group, Version: t.gvr.Version, Resource: t.gvr.Resource,
		})
		if err != nil {
			return false, "", err
		}
		if !allowed {
			denied = append(denied, verb)
		}
	}
	if len(denied) > 0 {
		scope := "cluster-wide"
		if t.namespaced {
			scope = "in namespace " + trig.Namespace
		}
		return false, fmt.Sprintf("ServiceAccount %s may not %s %s %s", sa, strings.Join(denied, " and "), t.gvr.GroupResource(), scope), nil
	}
	if ref := trig.Spec.NodeBudgetRef; ref != nil {
		// A budget is its owner's to give: naming it takes the verb "use" on it.
		budgets := v1alpha1.Resource("nodebudgets")
		allowed, err := accessreview.Review(ctx, a.kube, sa, authorizationv1.ResourceAttributes{
			Verb: v1alpha1.VerbUse, Group: budgets.Group, Version: v1alpha1.SchemeGroupVersion.Version, Resource: budgets.Resource, Name: ref.Name,
		})
		if err != nil {
			return false, "", err
		}
		if !allowed {
			return false, fmt.Sprintf("ServiceAccount %s may not use NodeBudget %s (verb %q on %s)", sa, ref.Name, v1alpha1.VerbUse, budgets), nil
		}
	}
	return true, "", nil
}

// denied tells whether the last answer kept for the trigger, as it is now (UID,
// generation, ServiceAccount), denied it: its ServiceAccount may not use its NodeBudget,
// or list and watch its kind (one answer says both, and either stops its starts). No
// answer kept (the operator started since, or the trigger changed and has not synced) is
// no denial: its pipelines were started when it was allowed, and still retire nodes. An
// expired answer still counts: the trigger is looked at again when it expires.
func (a *accessChecker) denied(trig *v1alpha1.PipelineTrigger) bool {
	q, answer, ok := a.answers.Kept(cache.MetaObjectToName(trig))
	return ok && q.uid == trig.UID && q.generation == trig.Generation && q.serviceAccount == serviceAccountOf(trig).Name &&
		!answer.Allowed
}
