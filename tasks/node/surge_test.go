package node

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// singleReplica is a Deployment apps/web of one available replica, its ReplicaSet and its
// one pod, web-1, ready on node n1.
func singleReplica() []runtime.Object {
	controller := true
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", UID: "d-uid", Generation: 1, ResourceVersion: "1"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, AvailableReplicas: 1},
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", UID: "rs", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "d-uid", Controller: &controller,
	}}}}
	pod := managedPod("web-1")
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return []runtime.Object{newNode("n1", true, nil), d, rs, pod}
}

func deployment(t *testing.T, client *fake.Clientset) *appsv1.Deployment {
	t.Helper()
	d, err := client.AppsV1().Deployments("apps").Get(context.Background(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	return d
}

// setAvailable plays the Deployment controller: n replicas available.
func setAvailable(t *testing.T, client *fake.Clientset, n int32) {
	t.Helper()
	d := deployment(t, client)
	d.Status.ObservedGeneration, d.Status.AvailableReplicas = d.Generation, n
	_, err := client.AppsV1().Deployments("apps").UpdateStatus(context.Background(), d, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// call runs the drain's Create as the engine would: with the outputs and the created
// record of the calls before, merged.
func call(t *testing.T, d Drain, req *executor.Request) (contract.Result, error) {
	t.Helper()
	res, err := d.Create(context.Background(), req)
	if err == nil {
		req.Outputs[req.Step] = res.Outputs
		for k, v := range res.Created {
			if req.Created == nil {
				req.Created = map[string]string{}
			}
			req.Created[k] = v
		}
	}
	return res, err
}

// TestDrainSurgesASingleReplicaBeforeEvictingIt: a Deployment of one replica is never left
// without an available one: its scale-up is recorded first, then made, the pod is evicted
// only once the replacement is available, and the Deployment goes back to one replica in
// the same call, exactly once.
func TestDrainSurgesASingleReplicaBeforeEvictingIt(t *testing.T) {
	client := fake.NewClientset(singleReplica()...)
	readsEverything(client)
	evicted := evictions(client, nil)
	clock := testingclock.NewFakeClock(time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC))
	d := Drain{Clock: clock}
	req := request(t, d, client, map[string]string{"node": "n1"})
	req.HookStarted = clock.Now()

	// 1. The intent is recorded: nothing changes until the engine has written it.
	res, err := call(t, d, req)
	require.NoError(t, err)
	assert.False(t, res.Done)
	assert.Equal(t, map[string]string{createdSurged: "apps/web"}, res.Created)
	assert.Equal(t, int32(1), *deployment(t, client).Spec.Replicas)
	assert.Empty(t, *evicted)
	assert.Contains(t, res.Message, "apps/web-1: its Deployment apps/web is scaled up first")

	// 2. The scale-up, with the record of what it was.
	res, err = call(t, d, req)
	require.NoError(t, err)
	scaled := deployment(t, client)
	assert.Equal(t, int32(2), *scaled.Spec.Replicas)
	assert.JSONEq(t, `{"pipeline":"uid-1","replicas":1,"surge":1}`, scaled.Annotations[SurgedByAnnotation])
	assert.Empty(t, *evicted, "no eviction before the replacement is available")
	assert.Equal(t, []contract.Blocker{{Kind: "Deployment", Namespace: "apps", Name: "web"}}, res.BlockedBy)

	// 3. A call again scales nothing more, and waits for the replacement.
	res, err = call(t, d, req)
	require.NoError(t, err)
	assert.Equal(t, int32(2), *deployment(t, client).Spec.Replicas)
	assert.Empty(t, *evicted)
	assert.Contains(t, res.Message, "waiting for its replacement: Deployment apps/web has 1 of 2 replicas available")

	// 4. Available: the pod is evicted and the Deployment scaled back at once.
	setAvailable(t, client, 2)
	res, err = call(t, d, req)
	require.NoError(t, err)
	assert.Equal(t, []string{"web-1"}, *evicted)
	restored := deployment(t, client)
	assert.Equal(t, int32(1), *restored.Spec.Replicas)
	assert.NotContains(t, restored.Annotations, SurgedByAnnotation)
	assert.Contains(t, res.Message, "Deployment apps/web scaled back to 1 replicas")

	// 5. The pod gone, the drain ends; the Deployment is not touched again, and its
	// teardown changes nothing.
	require.NoError(t, client.CoreV1().Pods("apps").Delete(context.Background(), "web-1", metav1.DeleteOptions{}))
	d2 := deployment(t, client)
	d2.Spec.Replicas = ptr.To[int32](3) // someone scales it meanwhile
	_, err = client.AppsV1().Deployments("apps").Update(context.Background(), d2, metav1.UpdateOptions{})
	require.NoError(t, err)
	res, err = call(t, d, req)
	require.NoError(t, err)
	assert.True(t, res.Done)
	assert.Equal(t, "node drained, 1 pods evicted", res.Message)
	_, err = d.Delete(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, int32(3), *deployment(t, client).Spec.Replicas)
}

// TestDrainTeardownScalesBackWhatItScaledUp: a drain torn down while it waits on a
// replacement (the pipeline deleted, or failed under onFailure Teardown) scales the
// Deployment back; a Deployment scaled by someone else since keeps their replicas.
func TestDrainTeardownScalesBackWhatItScaledUp(t *testing.T) {
	for _, tt := range []struct {
		name         string
		changedSince bool
		want         int32
		message      string
	}{
		{"as it left it", false, 1, "Deployment apps/web scaled back to 1 replicas"},
		{"changed since", true, 5, "Deployment apps/web left at the 5 replicas someone set since the drain scaled it up"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(singleReplica()...)
			readsEverything(client)
			evictions(client, nil)
			d := Drain{}
			req := request(t, d, client, map[string]string{"node": "n1"})
			for range 2 { // record, then scale
				_, err := call(t, d, req)
				require.NoError(t, err)
			}
			require.Equal(t, int32(2), *deployment(t, client).Spec.Replicas)
			if tt.changedSince {
				scaled := deployment(t, client)
				scaled.Spec.Replicas = ptr.To[int32](5)
				_, err := client.AppsV1().Deployments("apps").Update(context.Background(), scaled, metav1.UpdateOptions{})
				require.NoError(t, err)
			}

			res, err := d.Delete(context.Background(), req)
			require.NoError(t, err)
			assert.True(t, res.Done)
			assert.Equal(t, tt.message, res.Message)
			after := deployment(t, client)
			assert.Equal(t, tt.want, *after.Spec.Replicas)
			assert.NotContains(t, after.Annotations, SurgedByAnnotation)

			// Exactly once: a teardown run again changes nothing.
			res, err = d.Delete(context.Background(), req)
			require.NoError(t, err)
			assert.Empty(t, res.Message)
			assert.Equal(t, tt.want, *deployment(t, client).Spec.Replicas)
		})
	}
}

// TestDrainTimeoutScalesBackBeforeFailing: a drain that fails at its deadline while a
// replacement never became available leaves the Deployment as it found it.
func TestDrainTimeoutScalesBackBeforeFailing(t *testing.T) {
	client := fake.NewClientset(singleReplica()...)
	readsEverything(client)
	evictions(client, nil)
	clock := testingclock.NewFakeClock(time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC))
	d := Drain{Clock: clock}
	req := request(t, d, client, map[string]string{"node": "n1", "timeout": "1m"})
	req.HookStarted = clock.Now()
	for range 2 {
		_, err := call(t, d, req)
		require.NoError(t, err)
	}
	require.Equal(t, int32(2), *deployment(t, client).Spec.Replicas)

	clock.Step(2 * time.Minute)
	_, err := call(t, d, req)
	require.Error(t, err)
	assert.True(t, contract.IsPermanent(err))
	assert.Contains(t, err.Error(), "Deployment apps/web scaled back to 1 replicas")
	assert.Equal(t, int32(1), *deployment(t, client).Spec.Replicas)
}

// TestDrainNeverSurgesWhatItCannotReplaceFirst: a StatefulSet's pod and a bare pod wait on
// their PodDisruptionBudget, and the message says why no replacement comes first; with
// replacement None a Deployment's pod waits as kubectl's drain would.
func TestDrainNeverSurgesWhatItCannotReplaceFirst(t *testing.T) {
	controller := true
	sts := managedPod("db-0")
	sts.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts", Controller: &controller}}
	tests := []struct {
		name    string
		objects []runtime.Object
		params  map[string]string
		pod     string
		want    string
	}{
		{"a StatefulSet's pod", []runtime.Object{newNode("n1", true, nil), sts}, map[string]string{"node": "n1"}, "db-0",
			"2 pods left"},
		{"replacement None", singleReplica(), map[string]string{"node": "n1", "replacement": "None"}, "web-1",
			"1 pods left; apps/web-1: The disruption budget web-pdb needs 2 healthy pods and has 2 currently"},
	}
	tests[0].objects = append(tests[0].objects, managedPod("web-2"))
	tests[0].want = "2 pods left; apps/db-0: The disruption budget web-pdb needs 2 healthy pods and has 2 currently " +
		"(a StatefulSet's pod is never surged: its replacement has the same name and identity, so it starts only once this pod is gone)"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.objects...)
			readsEverything(client)
			evictions(client, map[string]bool{tt.pod: true})
			d := Drain{}
			req := request(t, d, client, tt.params)
			res, err := call(t, d, req)
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.Message)
			assert.Empty(t, res.Created)
			assert.Equal(t, []contract.Blocker{{Kind: "PodDisruptionBudget", Namespace: "apps", Name: "web-pdb"}}, res.BlockedBy)
		})
	}
}

// TestDrainPlanNamesTheReplacementFirst: the plan of a drain that would surge says so for
// the pod, with the capacity it adds, and changes nothing; under replacement None the same
// pod is only evicted.
func TestDrainPlanNamesTheReplacementFirst(t *testing.T) {
	for _, tt := range []struct {
		replacement, action, note string
	}{
		{"Surge", "surge first", "replacement first: Deployment apps/web scaled from 1 to 2 replicas until the replacement is available on another node, then back"},
		{"None", "evict", ""},
	} {
		t.Run(tt.replacement, func(t *testing.T) {
			client := fake.NewClientset(singleReplica()...)
			readsEverything(client)
			d := Drain{}
			plan, err := d.Plan(context.Background(), request(t, d, client, map[string]string{"node": "n1", "replacement": tt.replacement}))
			require.NoError(t, err)
			assertReadOnly(t, client)
			require.NotEmpty(t, plan.Details)
			row := plan.Details[0]
			assert.Equal(t, contract.PlanItem{Kind: "Pod", Name: "apps/web-1", Action: tt.action, Note: tt.note}, row)
			if tt.replacement == "Surge" {
				assert.Contains(t, plan.Summary, "1 replaced first")
			} else {
				assert.NotContains(t, plan.Summary, "replaced first")
			}
		})
	}
}

// TestDrainSurgeIsExactlyOnceWhenAResultIsLost: an operator killed after a call changed the
// Deployment but before the step's status recorded the call's result calls again with the
// request of before: the Deployment's annotation, not the status, says what was done, so
// nothing is scaled twice and nothing is scaled back twice.
func TestDrainSurgeIsExactlyOnceWhenAResultIsLost(t *testing.T) {
	client := fake.NewClientset(singleReplica()...)
	readsEverything(client)
	evicted := evictions(client, nil)
	d := Drain{}
	req := request(t, d, client, map[string]string{"node": "n1"})
	_, err := call(t, d, req) // the intent, recorded
	require.NoError(t, err)
	// again is a request as the status had it after the intent: its created record
	// and its outputs, copied, as each call of the engine's reads them anew.
	again := func() *executor.Request {
		r := *req
		r.Created = maps.Clone(req.Created)
		r.Outputs = map[string]map[string]string{req.Step: maps.Clone(req.Outputs[req.Step])}
		return &r
	}

	// The scale-up's result is lost: the same request again.
	for range 3 {
		_, err = d.Create(context.Background(), again())
		require.NoError(t, err)
		assert.Equal(t, int32(2), *deployment(t, client).Spec.Replicas, "scaled up once")
	}

	// The eviction and the scale-back's result is lost too.
	setAvailable(t, client, 2)
	_, err = d.Create(context.Background(), again())
	require.NoError(t, err)
	require.Equal(t, []string{"web-1"}, *evicted)
	require.Equal(t, int32(1), *deployment(t, client).Spec.Replicas)
	someoneScales := deployment(t, client)
	someoneScales.Spec.Replicas = ptr.To[int32](4)
	_, err = client.AppsV1().Deployments("apps").Update(context.Background(), someoneScales, metav1.UpdateOptions{})
	require.NoError(t, err)
	for range 2 {
		_, err = d.Create(context.Background(), again())
		require.NoError(t, err)
		_, err = d.Delete(context.Background(), again())
		require.NoError(t, err)
	}
	assert.Equal(t, int32(4), *deployment(t, client).Spec.Replicas, "never scaled back twice, nor up again")
}

// TestDrainKeepsWhatItDidWhenTheScaleBackFails: a Deployment that cannot be scaled back in
// the call that evicted its pod (its controller changed it in between) is scaled back at
// the next call, and the eviction is counted all the same.
func TestDrainKeepsWhatItDidWhenTheScaleBackFails(t *testing.T) {
	client := fake.NewClientset(singleReplica()...)
	readsEverything(client)
	evictions(client, nil)
	d := Drain{}
	req := request(t, d, client, map[string]string{"node": "n1"})
	for range 2 { // record, then scale
		_, err := call(t, d, req)
		require.NoError(t, err)
	}
	setAvailable(t, client, 2)
	refuse := true
	client.PrependReactor("patch", "deployments", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if refuse {
			refuse = false
			return true, nil, apierrors.NewConflict(appsv1.Resource("deployments"), "web", errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	res, err := call(t, d, req)
	require.NoError(t, err)
	assert.Equal(t, "1", res.Outputs[OutputPodsEvicted])
	assert.Contains(t, res.Message, "scaling back at the next call")
	assert.Equal(t, int32(2), *deployment(t, client).Spec.Replicas)

	_, err = call(t, d, req)
	require.NoError(t, err)
	assert.Equal(t, int32(1), *deployment(t, client).Spec.Replicas)
	assert.NotContains(t, deployment(t, client).Annotations, SurgedByAnnotation)
}
