package trigger

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/pkg/accessreview"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
)

// withRBAC gives the controller running informers of the RBAC objects of rbac, as
// cmd/stepwise-operator does; the returned function starts them once the controller is
// made, and waits until they have synced.
func withRBAC(t *testing.T, rbac ...runtime.Object) (fixtureOption, func(f *fixture)) {
	t.Helper()
	factory := kubeinformers.NewSharedInformerFactory(kubefake.NewClientset(rbac...), 0)
	r := factory.Rbac().V1()
	informers := []cache.SharedInformer{r.Roles().Informer(), r.RoleBindings().Informer(), r.ClusterRoles().Informer(),
		r.ClusterRoleBindings().Informer()}
	opt := func(cfg *Config) { cfg.AccessChanges = informers }
	run := func(f *fixture) {
		ctx, cancel := context.WithCancel(f.ctx)
		factory.Start(ctx.Done())
		t.Cleanup(factory.Shutdown)
		t.Cleanup(cancel) // runs first: cleanups are last in, first out
		for _, inf := range informers {
			require.True(t, cache.WaitForCacheSync(f.ctx.Done(), inf.HasSynced))
		}
	}
	return opt, run
}

// queuedAfterDelay returns, sorted, the keys the controller queued with a delay of at most
// accessChangeDelay: a key queued after them with that delay comes out last.
func queuedAfterDelay(t *testing.T, f *fixture) []string {
	t.Helper()
	sentinel := cache.ObjectName{Namespace: "sentinel", Name: "last"}
	// A nanosecond later than the keys, so that the delaying queue hands it over after
	// them: at the same time their order is the heap's, and a drain could see the sentinel
	// before a key reached the queue.
	f.c.queue.AddAfter(sentinel, accessChangeDelay+time.Nanosecond)
	var got []string
	f.clock.Step(accessChangeDelay + time.Nanosecond)
	require.Eventually(t, func() bool {
		got = append(got, drain(f.c)...)
		if slices.Contains(got, sentinel.String()) {
			return true
		}
		// The queue may have set its timer from the time before the step.
		f.clock.Step(100 * time.Millisecond)
		return false
	}, 10*time.Second, 10*time.Millisecond)
	// The delaying queue hands over an item that arrives ready at once, and those of its
	// heap at its next turn: the sentinel can overtake keys by a moment. Drain until the
	// queue stays empty for a few polls.
	for quiet, polls := 0, 0; quiet < 3 && polls < 100; polls++ {
		more := drain(f.c)
		got = append(got, more...)
		if len(more) > 0 {
			quiet = 0
		} else {
			quiet++
		}
		time.Sleep(10 * time.Millisecond) //nolint:forbidigo // a bounded settle: three quiet polls
	}
	got = slices.DeleteFunc(got, func(k string) bool { return k == sentinel.String() })
	if len(got) == 0 {
		return nil
	}
	slices.Sort(got)
	return got
}

// syncAll syncs each trigger, and returns how many reviews each one's ServiceAccount was
// the subject of.
func syncAll(t *testing.T, f *fixture, keys ...cache.ObjectName) map[string]int {
	t.Helper()
	f.rbac.reviews = nil
	for _, key := range keys {
		_, err := f.syncOnce(key)
		require.NoError(t, err)
		f.refresh()
	}
	reviews := map[string]int{}
	for _, r := range f.rbac.reviews {
		reviews[r.User]++
	}
	return reviews
}

func sa(ns, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func user(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

func roleBinding(ns, name string, ref rbacv1.RoleRef, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: "1"}, RoleRef: ref, Subjects: subjects}
}

func clusterRoleBinding(name string, ref rbacv1.RoleRef, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"}, RoleRef: ref, Subjects: subjects}
}

func roleRef(name string) rbacv1.RoleRef {
	return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}
}

func clusterRoleRef(name string) rbacv1.RoleRef {
	return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
}

// TestAccessChangeConcernsTheServiceAccountsItNames: a change of a binding makes stale,
// and queues, only the triggers whose ServiceAccount one of its subjects names (as the
// ServiceAccount, its user or one of its groups), and for a RoleBinding only those of its
// namespace (it grants nothing elsewhere); a change of a Role or ClusterRole is a change
// of the bindings that refer to it. The other triggers keep their answers: their next sync
// makes no SubjectAccessReview.
func TestAccessChangeConcernsTheServiceAccountsItNames(t *testing.T) {
	const (
		retirer       = "system:serviceaccount:ns:retirer"
		deployer      = "system:serviceaccount:ns:deployer"
		otherDeployer = "system:serviceaccount:other:deployer"
	)
	retire, web, otherWeb := keyOf("retire"), keyOf("web"), cache.ObjectName{Namespace: "other", Name: "web"}
	users := map[cache.ObjectName]string{retire: retirer, web: deployer, otherWeb: otherDeployer}
	// The bindings that exist: a Role's change is attributed through them.
	existing := []runtime.Object{
		roleBinding("ns", "web-readers", roleRef("web-reader"), sa("", "deployer")),
		roleBinding("other", "web-readers", roleRef("web-reader"), sa("other", "deployer")),
		clusterRoleBinding("node-readers", clusterRoleRef("node-reader"), sa("ns", "retirer")),
		roleBinding("other", "node-readers", clusterRoleRef("node-reader"), group("system:serviceaccounts:other")),
	}
	tests := []struct {
		name     string
		old, new any
		want     []cache.ObjectName
	}{
		{name: "RoleBinding naming a ServiceAccount of its namespace",
			new: roleBinding("ns", "b", roleRef("r"), sa("ns", "deployer")), want: []cache.ObjectName{web}},
		{name: "RoleBinding naming a ServiceAccount without namespace: its own",
			new: roleBinding("ns", "b", roleRef("r"), sa("", "deployer")), want: []cache.ObjectName{web}},
		{name: "RoleBinding in another namespace grants nothing in the trigger's",
			new: roleBinding("ns", "b", roleRef("r"), sa("other", "deployer"))},
		{name: "RoleBinding of the other namespace",
			new: roleBinding("other", "b", roleRef("r"), sa("other", "deployer")), want: []cache.ObjectName{otherWeb}},
		{name: "RoleBinding naming the ServiceAccount's user",
			new: roleBinding("ns", "b", roleRef("r"), user(deployer)), want: []cache.ObjectName{web}},
		{name: "RoleBinding naming the group of the namespace's ServiceAccounts",
			new: roleBinding("ns", "b", roleRef("r"), group("system:serviceaccounts:ns")), want: []cache.ObjectName{retire, web}},
		{name: "RoleBinding naming nobody's",
			new: roleBinding("ns", "b", roleRef("r"), sa("ns", "nobody"), user("alice"), group("admins"), user(otherDeployer))},
		{name: "ClusterRoleBinding naming a ServiceAccount",
			new: clusterRoleBinding("b", clusterRoleRef("r"), sa("ns", "retirer")), want: []cache.ObjectName{retire}},
		{name: "ClusterRoleBinding naming a ServiceAccount without namespace names none",
			new: clusterRoleBinding("b", clusterRoleRef("r"), sa("", "retirer"))},
		{name: "ClusterRoleBinding naming every ServiceAccount",
			new: clusterRoleBinding("b", clusterRoleRef("r"), group("system:serviceaccounts")), want: []cache.ObjectName{otherWeb, retire, web}},
		{name: "ClusterRoleBinding naming every authenticated user",
			new: clusterRoleBinding("b", clusterRoleRef("r"), group("system:authenticated")), want: []cache.ObjectName{otherWeb, retire, web}},
		{name: "ClusterRoleBinding naming another namespace's ServiceAccounts",
			new: clusterRoleBinding("b", clusterRoleRef("r"), group("system:serviceaccounts:other")), want: []cache.ObjectName{otherWeb}},
		{name: "a binding's update: its old and new subjects",
			old: clusterRoleBinding("b", clusterRoleRef("r"), sa("ns", "deployer")),
			new: clusterRoleBinding("b", clusterRoleRef("r"), sa("ns", "retirer")), want: []cache.ObjectName{retire, web}},
		{name: "a binding's deletion, as a tombstone",
			old:  cache.DeletedFinalStateUnknown{Key: "ns/b", Obj: roleBinding("ns", "b", roleRef("r"), sa("ns", "deployer"))},
			want: []cache.ObjectName{web}},
		{name: "a Role: the bindings that refer to it",
			new: &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-reader"}}, want: []cache.ObjectName{web}},
		{name: "a Role no binding refers to",
			new: &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "node-reader"}}},
		{name: "a ClusterRole: the ClusterRoleBindings and RoleBindings that refer to it",
			old: &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "node-reader"}}, want: []cache.ObjectName{otherWeb, retire}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			other := webAppTrigger()
			other.Namespace = "other"
			opt, runRBAC := withRBAC(t, existing...)
			f := newFixture(t, objs(triggertest.Trigger(), webAppTrigger(), other), opt)
			runRBAC(f)
			all := []cache.ObjectName{otherWeb, retire, web}
			require.Equal(t, map[string]int{retirer: 2, deployer: 2, otherDeployer: 2}, syncAll(t, f, all...))
			drain(f.c)

			f.c.onAccessChange(tt.old, tt.new)

			var want []string
			wantReviews := map[string]int{}
			for _, key := range tt.want {
				want = append(want, key.String())
				wantReviews[users[key]] = 2
			}
			slices.Sort(want)
			assert.Equal(t, want, queuedAfterDelay(t, f))
			assert.Equal(t, wantReviews, syncAll(t, f, all...), "only they ask again")
		})
	}
}

// TestUnattributedAccessChangesAreRateLimited: a change that names no ServiceAccount the
// controller can see (an informer that keeps only metadata) makes every answer stale, but
// at most once per accessreview.UnattributedInterval: a burst of 100 such changes within a second
// costs two rounds of reviews, the first at once and the last once the interval is over,
// so that the last change is never lost.
func TestUnattributedAccessChangesAreRateLimited(t *testing.T) {
	tests := []struct {
		name   string
		change any
	}{
		{name: "metadata only", change: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}}},
		{name: "a tombstone of metadata", change: cache.DeletedFinalStateUnknown{Key: "b", Obj: &metav1.PartialObjectMetadata{}}},
		{name: "a Role without binding informers", change: &rbacv1.Role{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// No object: no informer event queues the trigger.
			f := newFixture(t, objs(triggertest.Trigger(), newTemplate("retire-node")))
			reviews := func() int {
				n := len(f.rbac.reviews)
				f.rbac.reviews = nil
				return n
			}
			f.sync("retire")
			require.Equal(t, 2, reviews())
			first := f.clock.Now()

			var requeue time.Duration
			var lastSync time.Time
			for range 100 {
				f.c.onAccessChange(nil, tt.change)
				lastSync, requeue = f.clock.Now(), f.sync("retire")
				f.clock.Step(10 * time.Millisecond)
			}
			assert.Equal(t, 2, reviews(), "the first change counts at once")
			assert.Equal(t, []string{"ns/retire"}, queuedAfterDelay(t, f), "queued for the first")
			due := first.Add(accessreview.UnattributedInterval)
			assert.Equal(t, due, lastSync.Add(requeue), "a sync before the last change counts asks to be run again when it does")

			f.clock.SetTime(due)
			f.sync("retire")
			assert.Equal(t, 2, reviews(), "the last change counts")
			f.clock.Step(time.Second)
			f.sync("retire")
			assert.Zero(t, reviews(), "two rounds in all")
			// The queue may still hold the trigger for the last change (whether the delaying
			// queue merged that AddAfter into the first depends on when its goroutine ran):
			// its sync asks nothing again.
			for _, key := range queuedAfterDelay(t, f) {
				name, err := cache.ParseObjectName(key)
				require.NoError(t, err)
				f.sync(name.Name)
			}
			assert.Zero(t, reviews(), "nothing queued makes a third round")

			// Once the interval is over, a change counts at once again.
			f.clock.Step(accessreview.UnattributedInterval)
			f.c.onAccessChange(nil, tt.change)
			f.sync("retire")
			assert.Equal(t, 2, reviews())
		})
	}
}

// TestTrailingRunIsQueued: the triggers are queued for the run that covers a change made
// within the interval when nothing queued them sooner.
func TestTrailingRunIsQueued(t *testing.T) {
	f := newFixture(t, objs(triggertest.Trigger(), newTemplate("retire-node")))
	f.sync("retire")
	change := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	f.c.onAccessChange(nil, change)
	assert.Equal(t, []string{"ns/retire"}, queuedAfterDelay(t, f))

	f.c.onAccessChange(nil, change) // within the interval: for its end
	assert.Empty(t, queuedAfterDelay(t, f))
	f.clock.SetTime(start.Add(accessreview.UnattributedInterval))
	assert.Equal(t, []string{"ns/retire"}, queuedAfterDelay(t, f))
}
