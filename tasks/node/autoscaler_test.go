package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// webAutoscaler scales Deployment apps/web between minReplicas and maxReplicas.
func webAutoscaler(minReplicas, maxReplicas int32) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To(minReplicas),
			MaxReplicas:    maxReplicas,
		},
	}
}

func autoscaler(t *testing.T, client *fake.Clientset) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	a, err := client.AutoscalingV2().HorizontalPodAutoscalers("apps").Get(context.Background(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	return a
}

// scaleTo plays the autoscaler and the Deployment controller: n replicas, all available.
func scaleTo(t *testing.T, client *fake.Clientset, n int32) {
	t.Helper()
	d := deployment(t, client)
	d.Spec.Replicas = ptr.To(n)
	d.Generation++
	_, err := client.AppsV1().Deployments("apps").Update(context.Background(), d, metav1.UpdateOptions{})
	require.NoError(t, err)
	setAvailable(t, client, n)
}

// TestDrainSurgesThroughTheAutoscaler: a Deployment a HorizontalPodAutoscaler scales is
// surged through the autoscaler's bounds, which the autoscaler would otherwise undo: the
// intent is recorded, the bounds raised with the record in one patch (the Deployment is
// not touched), the pod evicted once the autoscaler has brought the replacement up, and the
// bounds put back, exactly once; a maxReplicas below the surge is raised and put back too.
func TestDrainSurgesThroughTheAutoscaler(t *testing.T) {
	for _, tt := range []struct {
		name                     string
		minReplicas, maxReplicas int32
		raisedMin, raisedMax     int32
		wantRecord, wantBounds   string
	}{
		{"room under maxReplicas", 1, 3, 2, 3, `{"pipeline":"uid-1","minReplicas":1,"maxReplicas":3,"replicas":1,"surge":1}`, "1..3"},
		{"maxReplicas raised too", 1, 1, 2, 2, `{"pipeline":"uid-1","minReplicas":1,"maxReplicas":1,"replicas":1,"surge":1}`, "1..1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(append(singleReplica(), webAutoscaler(tt.minReplicas, tt.maxReplicas))...)
			readsEverything(client)
			evicted := evictions(client, nil)
			clock := testingclock.NewFakeClock(time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC))
			d := Drain{Clock: clock}
			req := request(t, d, client, map[string]string{"node": "n1"})
			req.HookStarted = clock.Now()

			// 1. The intent, under the Deployment's key.
			res, err := call(t, d, req)
			require.NoError(t, err)
			assert.Equal(t, map[string]string{createdSurged: "apps/web"}, res.Created)
			assert.Contains(t, res.Message, "apps/web-1: its Deployment apps/web is scaled up first, through its HorizontalPodAutoscaler apps/web")
			assert.Equal(t, tt.minReplicas, *autoscaler(t, client).Spec.MinReplicas)

			// 2. The bounds are raised with the record; the Deployment is the autoscaler's.
			res, err = call(t, d, req)
			require.NoError(t, err)
			raised := autoscaler(t, client)
			assert.Equal(t, tt.raisedMin, *raised.Spec.MinReplicas)
			assert.Equal(t, tt.raisedMax, raised.Spec.MaxReplicas)
			assert.JSONEq(t, tt.wantRecord, raised.Annotations[SurgedByAnnotation])
			assert.Equal(t, int32(1), *deployment(t, client).Spec.Replicas, "the drain leaves the replicas to the autoscaler")
			assert.NotContains(t, deployment(t, client).Annotations, SurgedByAnnotation)
			assert.Equal(t, []contract.Blocker{{Kind: "Deployment", Namespace: "apps", Name: "web"}}, res.BlockedBy)
			assert.Contains(t, res.Message, "HorizontalPodAutoscaler apps/web's minReplicas was raised from 1 to 2")

			// 3. Until the autoscaler has scaled, the pod waits; nothing is raised twice.
			res, err = call(t, d, req)
			require.NoError(t, err)
			assert.Empty(t, *evicted)
			assert.Equal(t, tt.raisedMin, *autoscaler(t, client).Spec.MinReplicas)
			assert.Contains(t, res.Message, "waiting for its replacement: HorizontalPodAutoscaler apps/web scales Deployment apps/web to 2 replicas, 1 available")

			// 4. Scaled and available: the pod is evicted and the bounds go back at once.
			scaleTo(t, client, 2)
			res, err = call(t, d, req)
			require.NoError(t, err)
			assert.Equal(t, []string{"web-1"}, *evicted)
			back := autoscaler(t, client)
			assert.Equal(t, tt.wantBounds, boundsOf(back))
			assert.NotContains(t, back.Annotations, SurgedByAnnotation)
			assert.Contains(t, res.Message, "HorizontalPodAutoscaler apps/web back to minReplicas 1")

			// 5. The teardown changes nothing more.
			_, err = d.Delete(context.Background(), req)
			require.NoError(t, err)
			assert.Equal(t, tt.wantBounds, boundsOf(autoscaler(t, client)))
		})
	}
}

// boundsOf is a's bounds as "min..max".
func boundsOf(a *autoscalingv2.HorizontalPodAutoscaler) string {
	return fmt.Sprintf("%d..%d", ptrValue(a.Spec.MinReplicas, 1), a.Spec.MaxReplicas)
}

// TestDrainTeardownPutsTheAutoscalerBack: a drain torn down while it waits on the
// autoscaler puts the bounds back; bounds someone changed since stay theirs.
func TestDrainTeardownPutsTheAutoscalerBack(t *testing.T) {
	for _, tt := range []struct {
		name       string
		meanwhile  func(*testing.T, *fake.Clientset)
		wantBounds string
		wantSaid   string
	}{
		{"as it was", func(*testing.T, *fake.Clientset) {}, "1..3", "HorizontalPodAutoscaler apps/web back to minReplicas 1"},
		{"changed since", func(t *testing.T, client *fake.Clientset) {
			a := autoscaler(t, client)
			a.Spec.MinReplicas = ptr.To[int32](4)
			a.Spec.MaxReplicas = 6
			_, err := client.AutoscalingV2().HorizontalPodAutoscalers("apps").Update(context.Background(), a, metav1.UpdateOptions{})
			require.NoError(t, err)
		}, "4..6", "HorizontalPodAutoscaler apps/web left at the bounds someone set since the drain raised them"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(append(singleReplica(), webAutoscaler(1, 3))...)
			readsEverything(client)
			d := Drain{}
			req := request(t, d, client, map[string]string{"node": "n1"})
			for range 2 {
				_, err := call(t, d, req)
				require.NoError(t, err)
			}
			require.Equal(t, int32(2), *autoscaler(t, client).Spec.MinReplicas)
			tt.meanwhile(t, client)

			res, err := d.Delete(context.Background(), req)
			require.NoError(t, err)
			assert.Contains(t, res.Message, tt.wantSaid)
			a := autoscaler(t, client)
			assert.Equal(t, tt.wantBounds, boundsOf(a))
			assert.NotContains(t, a.Annotations, SurgedByAnnotation)
		})
	}
}

// TestDrainSurgesTheDeploymentWhenItCannotSeeTheAutoscalers: a ServiceAccount that may not
// list HorizontalPodAutoscalers gets the Deployment scaled itself, and is told that an
// autoscaler could undo it.
func TestDrainSurgesTheDeploymentWhenItCannotSeeTheAutoscalers(t *testing.T) {
	client := fake.NewClientset(singleReplica()...)
	readsEverything(client)
	client.PrependReactor("list", "horizontalpodautoscalers", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "autoscaling", Resource: "horizontalpodautoscalers"}, "", nil)
	})
	d := Drain{}
	req := request(t, d, client, map[string]string{"node": "n1"})
	_, err := call(t, d, req)
	require.NoError(t, err)
	res, err := call(t, d, req)
	require.NoError(t, err)
	assert.Equal(t, int32(2), *deployment(t, client).Spec.Replicas)
	assert.Contains(t, res.Message, "(the pipeline's ServiceAccount may not list HorizontalPodAutoscalers in apps: one that scales the Deployment would undo the surge)")
}

// TestDrainPlanNamesTheAutoscalerItRaises: the plan of a pod whose Deployment an
// autoscaler scales says the autoscaler's bounds are raised.
func TestDrainPlanNamesTheAutoscalerItRaises(t *testing.T) {
	client := fake.NewClientset(append(singleReplica(), webAutoscaler(1, 3))...)
	readsEverything(client)
	d := Drain{}
	plan, err := d.Plan(context.Background(), request(t, d, client, map[string]string{"node": "n1"}))
	require.NoError(t, err)
	assertReadOnly(t, client)
	require.NotEmpty(t, plan.Details)
	assert.Equal(t, contract.PlanItem{Kind: "Pod", Name: "apps/web-1", Action: "surge first",
		Note: "replacement first: HorizontalPodAutoscaler apps/web's minReplicas raised to 2 until the replacement is available on another node, then back"}, plan.Details[0])
}
