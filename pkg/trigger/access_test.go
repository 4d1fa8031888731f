package trigger

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/stepwise-dev/stepwise/pkg/accessreview"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
)

// rbac answers SubjectAccessReviews from a table of "user verb resource namespace" that are
// allowed, and records every review it answered.
type rbac struct {
	allowed map[string]bool
	reviews []authorizationv1.SubjectAccessReviewSpec
	err     error
}

func (r *rbac) react(action clienttesting.Action) (bool, runtime.Object, error) {
	sar := action.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
	r.reviews = append(r.reviews, sar.Spec)
	if r.err != nil {
		return true, nil, r.err
	}
	a := sar.Spec.ResourceAttributes
	sar.Status.Allowed = r.allowed[sar.Spec.User+" "+a.Verb+" "+a.Resource+" "+a.Namespace]
	return true, sar, nil
}

func (r *rbac) allow(user, resource, namespace string, verbs ...string) {
	if r.allowed == nil {
		r.allowed = map[string]bool{}
	}
	for _, v := range verbs {
		r.allowed[user+" "+v+" "+resource+" "+namespace] = true
	}
}

func newAccessFixture() (*accessChecker, *rbac, *testingclock.FakeClock) {
	kube := kubefake.NewClientset()
	r := &rbac{}
	kube.PrependReactor("create", "subjectaccessreviews", r.react)
	clk := testingclock.NewFakeClock(start)
	return newAccessChecker(kube, clk, time.Minute), r, clk
}

func accessTrigger(sa string) *v1alpha1.PipelineTrigger {
	return &v1alpha1.PipelineTrigger{
		ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: "ns", UID: "trigger-uid", Generation: 1},
		Spec:       v1alpha1.PipelineTriggerSpec{ServiceAccountName: sa},
	}
}

func TestAccessReviewAsTheServiceAccount(t *testing.T) {
	tests := []struct {
		name        string
		sa          string
		target      target
		allow       []string // verbs allowed
		allowNS     string
		wantAllowed bool
		wantMsg     string
		wantNS      string
	}{
		{name: "cluster-scoped, both verbs", sa: "retirer", target: target{gvr: nodesGVR}, allow: []string{"list", "watch"},
			wantAllowed: true},
		{name: "cluster-scoped, list only", sa: "retirer", target: target{gvr: nodesGVR}, allow: []string{"list"},
			wantMsg: "ServiceAccount ns/retirer may not watch nodes cluster-wide"},
		{name: "cluster-scoped, rights in the namespace only", sa: "retirer", target: target{gvr: nodesGVR},
			allow: []string{"list", "watch"}, allowNS: "ns", wantMsg: "ServiceAccount ns/retirer may not list and watch nodes cluster-wide"},
		{name: "namespaced, in the trigger's namespace", sa: "deployer", target: target{gvr: webappsGVR, namespaced: true},
			allow: []string{"list", "watch"}, allowNS: "ns", wantAllowed: true, wantNS: "ns"},
		{name: "namespaced, denied", sa: "deployer", target: target{gvr: webappsGVR, namespaced: true}, wantNS: "ns",
			wantMsg: "ServiceAccount ns/deployer may not list and watch webapps.demo.stepwise.dev in namespace ns"},
		{name: "the default ServiceAccount", sa: "", target: target{gvr: nodesGVR},
			wantMsg: "ServiceAccount ns/default may not list and watch nodes cluster-wide"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			a, r, _ := newAccessFixture()
			sa := tt.sa
			if sa == "" {
				sa = "default"
			}
			user := "system:serviceaccount:ns:" + sa
			r.allow(user, tt.target.gvr.Resource, tt.allowNS, tt.allow...)

			got, err := a.check(ctx, accessTrigger(tt.sa), tt.target)
			require.NoError(t, err)
			assert.Equal(t, tt.wantAllowed, got.Allowed)
			assert.Equal(t, tt.wantMsg, got.Message)
			assert.Equal(t, start.Add(time.Minute), got.Expires)

			require.Len(t, r.reviews, 2, "list and watch")
			for i, verb := range []string{"list", "watch"} {
				spec := r.reviews[i]
				assert.Equal(t, user, spec.User)
				assert.Equal(t, []string{"system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"}, spec.Groups)
				require.NotNil(t, spec.ResourceAttributes)
				assert.Equal(t, authorizationv1.ResourceAttributes{
					Namespace: tt.wantNS, Verb: verb, Group: tt.target.gvr.Group, Version: tt.target.gvr.Version,
					Resource: tt.target.gvr.Resource,
				}, *spec.ResourceAttributes, "no name: the answer holds for every object")
			}
		})
	}
}

func TestAccessAnswerIsCached(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	a, r, clk := newAccessFixture()
	user := "system:serviceaccount:ns:retirer"
	r.allow(user, "nodes", "", "list", "watch")
	trig := accessTrigger("retirer")
	nodes := target{gvr: nodesGVR}

	check := func() accessreview.Answer {
		t.Helper()
		got, err := a.check(ctx, trig, nodes)
		require.NoError(t, err)
		return got
	}
	assert.True(t, check().Allowed)
	require.Len(t, r.reviews, 2)

	clk.Step(59 * time.Second)
	assert.True(t, check().Allowed)
	assert.Len(t, r.reviews, 2, "cached for a minute")

	// The right is taken away: seen once the answer expires.
	r.allowed = nil
	clk.Step(time.Second)
	got := check()
	assert.False(t, got.Allowed)
	assert.Len(t, r.reviews, 4)
	assert.Equal(t, clk.Now().Add(time.Minute), got.Expires)

	// A change of the trigger asks again at once.
	r.allow(user, "nodes", "", "list", "watch")
	trig.Generation = 2
	assert.True(t, check().Allowed)
	assert.Len(t, r.reviews, 6)

	// So does another kind, or another ServiceAccount.
	_, err := a.check(ctx, trig, target{gvr: webappsGVR, namespaced: true})
	require.NoError(t, err)
	assert.Len(t, r.reviews, 8)

	// Forgetting the trigger drops its answer.
	a.answers.Forget(cache.MetaObjectToName(trig))
	assert.Zero(t, a.answers.Len())
}

func TestAccessReviewErrorIsNotCached(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	a, r, _ := newAccessFixture()
	r.err = errors.New("connection refused")
	_, err := a.check(ctx, accessTrigger("retirer"), target{gvr: nodesGVR})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "connection refused")

	r.err = nil
	r.allow("system:serviceaccount:ns:retirer", "nodes", "", "list", "watch")
	got, err := a.check(ctx, accessTrigger("retirer"), target{gvr: nodesGVR})
	require.NoError(t, err)
	assert.True(t, got.Allowed)
}

// TestRBACChangeCountsBeforeTheAnswerExpires: a ServiceAccount given, or deprived of, the
// right to list and watch the kind counts as soon as the RBAC change is seen, not when the
// kept answer expires a minute later; the RBAC objects that exist at start change nothing.
func TestRBACChangeCountsBeforeTheAnswerExpires(t *testing.T) {
	kube := kubefake.NewClientset(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "ns"}})
	// The fake clientset misses what is created between the informer's list and its watch:
	// the test goes on once the watch is there.
	watching := make(chan struct{})
	var once sync.Once
	kube.PrependWatchReactor("rolebindings", func(action clienttesting.Action) (bool, watch.Interface, error) {
		w, err := kube.Tracker().Watch(action.GetResource(), action.GetNamespace())
		once.Do(func() { close(watching) })
		return true, w, err
	})
	bindings := kubeinformers.NewSharedInformerFactory(kube, 0).Rbac().V1().RoleBindings().Informer()
	node := triggertest.Node("node-1", 0, retiring)
	f := newFixture(t, objs(triggertest.Trigger(), newTemplate("retire-node"), node), func(cfg *Config) {
		cfg.AccessChanges = []cache.SharedInformer{bindings}
	})
	go bindings.RunWithContext(f.ctx)
	require.True(t, cache.WaitForCacheSync(f.ctx.Done(), bindings.HasSynced))
	<-watching

	epoch := func() uint64 {
		return f.c.access.answers.Invalidations()
	}
	// queuedAfterChange makes an RBAC change, waits until it was seen and queued the
	// trigger (after its short delay, on the fake clock), and empties the queue.
	queuedAfterChange := func(change func() error) {
		t.Helper()
		before := epoch()
		require.NoError(t, change())
		require.Eventually(t, func() bool {
			f.clock.Step(accessChangeDelay)
			return epoch() > before && f.c.queue.Len() > 0
		}, 10*time.Second, 10*time.Millisecond)
		assert.Contains(t, drain(f.c), "ns/retire")
	}

	allowed := f.rbac.allowed
	f.rbac.allowed = nil
	f.sync("retire")
	assert.Equal(t, v1alpha1.TriggerReasonForbidden, readyOf(f.trigger("retire")).Reason)
	assert.Empty(t, f.pipelineList())
	assert.Empty(t, drain(f.c), "the RoleBinding that existed at start queued nothing")

	// The right is given: the kept answer still holds until RBAC is seen to change.
	f.rbac.allowed = allowed
	f.sync("retire")
	assert.Equal(t, v1alpha1.TriggerReasonForbidden, readyOf(f.trigger("retire")).Reason, "the answer is kept for a minute")

	queuedAfterChange(func() error {
		_, err := kube.RbacV1().RoleBindings("ns").Create(f.ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "retirer", Namespace: "ns"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "retirer"}}}, metav1.CreateOptions{})
		return err
	})
	f.sync("retire")
	assert.Equal(t, v1alpha1.TriggerReasonActive, readyOf(f.trigger("retire")).Reason)
	f.pipelineFor("retire", node)

	// The right is taken away: seen at the binding's deletion.
	f.rbac.allowed = nil
	queuedAfterChange(func() error { return kube.RbacV1().RoleBindings("ns").Delete(f.ctx, "retirer", metav1.DeleteOptions{}) })
	f.sync("retire")
	assert.Equal(t, v1alpha1.TriggerReasonForbidden, readyOf(f.trigger("retire")).Reason)
}
