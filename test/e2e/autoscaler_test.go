package e2e

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/tasks/node"
)

// TestDrainReplacesFirstThroughTheAutoscaler: a Deployment of one replica under a PDB of
// minAvailable 1 that a HorizontalPodAutoscaler scales (between 1 and 1, so that a scale of
// the Deployment itself would be undone at once) is drained by raising the autoscaler's
// bounds: the autoscaler brings the replacement up, the pod is evicted, the Deployment never
// has no available replica, and the autoscaler gets its bounds back.
func TestDrainReplacesFirstThroughTheAutoscaler(t *testing.T) {
	t.Parallel() // its own nodes, namespace, Deployment and autoscaler
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	sa := surgingRetirer(t, ns, rbacv1.PolicyRule{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers"},
		Verbs: []string{"list", "patch"}})
	retired := poolNode(t, ns)
	singleReplicaWithBudget(t, ns, ns)
	_, err := cluster.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    1,
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	poolNode(t, ns) // where the replacement goes

	// The autoscaler's bounds as the drain raises them.
	var raised atomic.Int32
	sampling, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		_ = wait.PollUntilContextCancel(sampling, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			if a, err := cluster.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{}); err == nil {
				raised.Store(max(raised.Load(), ptr.Deref(a.Spec.MinReplicas, 0)))
			}
			return false, nil
		})
	}()
	watched, stop := watchAvailability(t, ns, retired)
	p := retirePipeline(ns, sa, retired, map[string]string{"timeout": "3m"})
	p.Spec.Steps = p.Spec.Steps[:2] // cordon, drain
	_, err = stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	done := waitPipeline(t, ns, "retire", 3*time.Minute, func(p *v1alpha1.Pipeline) bool {
		return p.Status.Phase == v1alpha1.PipelineSucceeded || p.Status.Phase == v1alpha1.PipelineFailed
	})
	stop()
	stopSampling()
	<-sampled
	require.Equal(t, v1alpha1.PipelineSucceeded, done.Status.Phase, "%+v", done.Status)
	assert.Equal(t, int32(2), raised.Load(), "the drain raised the autoscaler's minReplicas by the surge")
	assert.Equal(t, "1", done.Status.Steps[1].Outputs[node.OutputPodsEvicted], "%+v", done.Status.Steps[1])

	a, err := cluster.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(1), ptr.Deref(a.Spec.MinReplicas, 0), "the autoscaler's bounds are back")
	assert.Equal(t, int32(1), a.Spec.MaxReplicas)
	assert.NotContains(t, a.Annotations, node.SurgedByAnnotation)
	d, err := cluster.Client.AppsV1().Deployments(ns).Get(context.Background(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, d.Annotations, node.SurgedByAnnotation, "the drain never scaled the Deployment itself")
	watched.mu.Lock()
	defer watched.mu.Unlock()
	t.Logf("%d samples: fewest available %d, most pods %d", watched.samples, watched.fewest, watched.mostPods)
	assert.Equal(t, int32(1), watched.fewest, "never without an available replica")
	assert.LessOrEqual(t, watched.mostPods, int32(2), "never more than the one extra pod of the surge")
}
