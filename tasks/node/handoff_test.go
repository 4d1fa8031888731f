package node

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// responderPod is pod apps/db-1 on node n1, whose controller answers for its eviction.
func responderPod() *corev1.Pod {
	pod := managedPod("db-1")
	pod.UID = "0b6f0f3c-5f8e-4c1a-9d0a-1f3f1a2b3c4d"
	pod.Spec.EvictionResponders = []corev1.EvictionResponder{
		{Name: "fallback.example.com/evictor", Priority: ptr.To[int32](2000)},
		{Name: "db.example.com/handoff", Priority: ptr.To[int32](10000)},
	}
	return pod
}

// servesEvictionRequests makes the fake cluster serve lifecycle.k8s.io/v1alpha1, and the
// API server's creation time on the EvictionRequests created.
func servesEvictionRequests(client *fake.Clientset, clock *testingclock.FakeClock) {
	client.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
		GroupVersion: lifecyclev1alpha1.SchemeGroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: "evictionrequests", Namespaced: true, Kind: "EvictionRequest"}},
	}}
	client.PrependReactor("create", "evictionrequests", func(action k8stesting.Action) (bool, runtime.Object, error) {
		action.(k8stesting.CreateAction).GetObject().(*lifecyclev1alpha1.EvictionRequest).CreationTimestamp = metav1.NewTime(clock.Now())
		return false, nil, nil
	})
}

func evictionRequest(t *testing.T, client *fake.Clientset) *lifecyclev1alpha1.EvictionRequest {
	t.Helper()
	req, err := client.LifecycleV1alpha1().EvictionRequests("apps").Get(context.Background(), "stepwise-drain-"+string(responderPod().UID), metav1.GetOptions{})
	require.NoError(t, err)
	return req
}

// TestDrainAsksTheRespondersToHandOffFirst: where the cluster serves EvictionRequests, a
// pod that names eviction responders is asked for through one (after the intent is
// recorded), waited on while its responders hand off, and never evicted by the drain when
// they take it; the request is deleted when the drain ends.
func TestDrainAsksTheRespondersToHandOffFirst(t *testing.T) {
	ctx := context.Background()
	clock := testingclock.NewFakeClock(time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC))
	client := fake.NewClientset(newNode("n1", true, nil), responderPod(), managedPod("web-1"))
	readsEverything(client)
	servesEvictionRequests(client, clock)
	evicted := evictions(client, nil)
	d := Drain{Clock: clock}
	req := request(t, d, client, map[string]string{"node": "n1"})
	req.HookStarted = clock.Now()
	key := "apps/stepwise-drain-" + string(responderPod().UID)

	// 1. The intent is recorded; the pod without responders is evicted as any.
	res, err := call(t, d, req)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{createdEvictionRequests: key}, res.Created)
	assert.Equal(t, []string{"web-1"}, *evicted)
	assert.Contains(t, res.Message, "apps/db-1: asking its eviction responders (db.example.com/handoff, fallback.example.com/evictor) to hand off first")
	_, err = client.LifecycleV1alpha1().EvictionRequests("apps").Get(ctx, "stepwise-drain-"+string(responderPod().UID), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "nothing is asked before the intent is recorded")
	require.NoError(t, client.CoreV1().Pods("apps").Delete(ctx, "web-1", metav1.DeleteOptions{})) // as its eviction does

	// 2. The request, and the wait on it.
	clock.Step(time.Second)
	res, err = call(t, d, req)
	require.NoError(t, err)
	asked := evictionRequest(t, client)
	assert.Equal(t, lifecyclev1alpha1.EvictionRequestSpec{
		Target:    lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: "db-1", UID: responderPod().UID}},
		Requester: EvictionRequester,
		Intent:    lifecyclev1alpha1.EvictionRequestIntentEviction,
	}, asked.Spec)
	assert.Equal(t, []contract.Blocker{{Kind: "EvictionRequest", Namespace: "apps", Name: asked.Name}}, res.BlockedBy)
	assert.Contains(t, res.Message, "waiting for its eviction responders (db.example.com/handoff, fallback.example.com/evictor) to hand off; evicted from 2026-12-07T08:05:01Z if they have not")
	assert.Equal(t, []string{"web-1"}, *evicted, "the pod waiting on its responders is not evicted")

	// 3. The responder hands off: the pod goes, the drain ends and deletes its request.
	require.NoError(t, client.CoreV1().Pods("apps").Delete(ctx, "db-1", metav1.DeleteOptions{}))
	res, err = call(t, d, req)
	require.NoError(t, err)
	assert.True(t, res.Done)
	assert.Equal(t, "node drained, 1 pods evicted; 1 EvictionRequest deleted", res.Message)
	_, err = client.LifecycleV1alpha1().EvictionRequests("apps").Get(ctx, asked.Name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
}

// TestDrainEvictsWhenTheHandOffDoesNotComeOrFails: a hand-off that does not come within
// handoffTimeout, or that failed, is withdrawn (intent Withdrawn, never asked again) and
// the pod is evicted with the Eviction API, saying why.
func TestDrainEvictsWhenTheHandOffDoesNotComeOrFails(t *testing.T) {
	for _, tt := range []struct {
		name  string
		after func(*testing.T, *fake.Clientset, *testingclock.FakeClock)
		why   string
	}{
		{
			name:  "no hand-off in time",
			after: func(_ *testing.T, _ *fake.Clientset, clock *testingclock.FakeClock) { clock.Step(time.Minute) },
			why:   "its responders did not hand off within 1m0s",
		},
		{
			name: "the hand-off failed",
			after: func(t *testing.T, client *fake.Clientset, _ *testingclock.FakeClock) {
				asked := evictionRequest(t, client)
				asked.Status.Conditions = []metav1.Condition{{Type: "Failed", Status: metav1.ConditionTrue, Reason: "NoFurtherResponder", Message: "db.example.com/handoff gave up"}}
				_, err := client.LifecycleV1alpha1().EvictionRequests("apps").UpdateStatus(context.Background(), asked, metav1.UpdateOptions{})
				require.NoError(t, err)
			},
			why: "the hand-off failed (NoFurtherResponder: db.example.com/handoff gave up)",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := testingclock.NewFakeClock(time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC))
			client := fake.NewClientset(newNode("n1", true, nil), responderPod())
			readsEverything(client)
			servesEvictionRequests(client, clock)
			evicted := evictions(client, map[string]bool{"db-1": true})
			d := Drain{Clock: clock}
			req := request(t, d, client, map[string]string{"node": "n1", "handoffTimeout": "1m", "replacement": "None"})
			req.HookStarted = clock.Now()
			for range 2 { // the intent, then the request
				_, err := call(t, d, req)
				require.NoError(t, err)
			}
			require.Empty(t, *evicted)

			tt.after(t, client, clock)
			res, err := call(t, d, req)
			require.NoError(t, err)
			assert.Equal(t, lifecyclev1alpha1.EvictionRequestIntentWithdrawn, evictionRequest(t, client).Spec.Intent)
			assert.Contains(t, res.Message, "apps/db-1: The disruption budget web-pdb needs 2 healthy pods and has 2 currently (no hand-off: "+tt.why+", so the Eviction API evicts it)")

			// Withdrawn, it stays so: the pod is evicted as any, and not asked for again.
			res, err = call(t, d, req)
			require.NoError(t, err)
			assert.Equal(t, lifecyclev1alpha1.EvictionRequestIntentWithdrawn, evictionRequest(t, client).Spec.Intent)
			assert.Contains(t, res.Message, "no hand-off: its EvictionRequest apps/"+evictionRequest(t, client).Name+" was withdrawn")
		})
	}
}

// TestDrainEvictsWhereEvictionRequestsAreNotServedOrAllowed: a cluster without the API (the
// alpha gate off) or a ServiceAccount that may not create EvictionRequests gets the
// Eviction API at once, with nothing recorded to withdraw.
func TestDrainEvictsWhereEvictionRequestsAreNotServedOrAllowed(t *testing.T) {
	t.Run("not served", func(t *testing.T) {
		client := fake.NewClientset(newNode("n1", true, nil), responderPod())
		readsEverything(client)
		evicted := evictions(client, nil)
		d := Drain{}
		res, err := call(t, d, request(t, d, client, map[string]string{"node": "n1"}))
		require.NoError(t, err)
		assert.Equal(t, []string{"db-1"}, *evicted)
		assert.Nil(t, res.Created)
	})
	t.Run("not allowed", func(t *testing.T) {
		clock := testingclock.NewFakeClock(time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC))
		client := fake.NewClientset(newNode("n1", true, nil), responderPod())
		readsEverything(client)
		servesEvictionRequests(client, clock)
		client.PrependReactor("create", "evictionrequests", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "lifecycle.k8s.io", Resource: "evictionrequests"}, "", nil)
		})
		evictions(client, map[string]bool{"db-1": true})
		d := Drain{Clock: clock}
		req := request(t, d, client, map[string]string{"node": "n1", "replacement": "None"})
		_, err := call(t, d, req)
		require.NoError(t, err)
		res, err := call(t, d, req)
		require.NoError(t, err)
		assert.Contains(t, res.Message, "(no hand-off first: the pipeline's ServiceAccount may not create EvictionRequests in apps)")
	})
}

// TestDrainTeardownWithdrawsWhatItAskedFor: a drain torn down while it waits on a hand-off
// deletes its EvictionRequest, so that nothing evicts the pod later by surprise.
func TestDrainTeardownWithdrawsWhatItAskedFor(t *testing.T) {
	ctx := context.Background()
	clock := testingclock.NewFakeClock(time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC))
	client := fake.NewClientset(newNode("n1", true, nil), responderPod())
	readsEverything(client)
	servesEvictionRequests(client, clock)
	d := Drain{Clock: clock}
	req := request(t, d, client, map[string]string{"node": "n1"})
	for range 2 {
		_, err := call(t, d, req)
		require.NoError(t, err)
	}
	name := evictionRequest(t, client).Name

	res, err := d.Delete(ctx, req)
	require.NoError(t, err)
	assert.Contains(t, res.Message, "1 EvictionRequest deleted")
	_, err = client.LifecycleV1alpha1().EvictionRequests("apps").Get(ctx, name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
	_, err = client.CoreV1().Pods("apps").Get(ctx, "db-1", metav1.GetOptions{})
	assert.NoError(t, err, "the pod stays")
}

// TestDrainPlanNamesTheHandOffFirst: the plan says which pods are handed off first, and to
// whom, where the cluster serves the API.
func TestDrainPlanNamesTheHandOffFirst(t *testing.T) {
	for _, served := range []bool{true, false} {
		t.Run(map[bool]string{true: "served", false: "not served"}[served], func(t *testing.T) {
			client := fake.NewClientset(newNode("n1", true, nil), responderPod())
			readsEverything(client)
			if served {
				servesEvictionRequests(client, testingclock.NewFakeClock(time.Now()))
			}
			d := Drain{}
			plan, err := d.Plan(context.Background(), request(t, d, client, map[string]string{"node": "n1", "handoffTimeout": "2m"}))
			require.NoError(t, err)
			assertReadOnly(t, client)
			require.NotEmpty(t, plan.Details)
			row := plan.Details[0]
			if !served {
				assert.Equal(t, contract.PlanItem{Kind: "Pod", Name: "apps/db-1", Action: "evict"}, row)
				assert.NotContains(t, plan.Summary, "handed off")
				return
			}
			assert.Equal(t, contract.PlanItem{Kind: "Pod", Name: "apps/db-1", Action: "hand off first",
				Note: "its eviction responders (db.example.com/handoff, fallback.example.com/evictor) are asked to hand off through an EvictionRequest, for up to 2m0s; then evicted"}, row)
			assert.Contains(t, plan.Summary, "1 handed off first")
		})
	}
}
