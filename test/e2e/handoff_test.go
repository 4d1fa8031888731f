package e2e

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/tasks/node"
)

// withResponder names an eviction responder in a pod spec, at the priority a workload's
// own controller takes.
func withResponder(name string) func(*corev1.PodSpec) {
	return func(spec *corev1.PodSpec) {
		spec.EvictionResponders = []corev1.EvictionResponder{{Name: name, Priority: ptr.To[int32](10000)}}
	}
}

// responder plays a workload's controller that answers for its pods' evictions: it hands a
// pod off (deletes it; its Deployment brings the replacement up elsewhere) and says so on
// the request. It records every EvictionRequest of the namespace it saw, by name.
type responder struct {
	mu        sync.Mutex
	seen      map[string]lifecyclev1alpha1.EvictionRequest
	handedOff []string // pods
}

func respondFor(t *testing.T, ns, name string) (*responder, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &responder{seen: map[string]lifecyclev1alpha1.EvictionRequest{}}
	done := make(chan struct{})
	requests := cluster.Client.LifecycleV1alpha1().EvictionRequests(ns)
	go func() {
		defer close(done)
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			list, err := requests.List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for _, req := range list.Items {
				r.mu.Lock()
				if prev, ok := r.seen[req.Name]; !ok || prev.Spec.Intent != lifecyclev1alpha1.EvictionRequestIntentWithdrawn {
					r.seen[req.Name] = req
				}
				r.mu.Unlock()
				if req.Spec.Intent != lifecyclev1alpha1.EvictionRequestIntentEviction || meta.IsStatusConditionTrue(req.Status.Conditions, "TargetEvicted") {
					continue
				}
				pod, err := cluster.Client.CoreV1().Pods(ns).Get(ctx, req.Spec.Target.Pod.Name, metav1.GetOptions{})
				if err != nil || pod.UID != req.Spec.Target.Pod.UID ||
					!slices.ContainsFunc(pod.Spec.EvictionResponders, func(er corev1.EvictionResponder) bool { return er.Name == name }) {
					continue
				}
				if err := cluster.Client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
					continue
				}
				req.Status.ObservedGeneration = &req.Generation
				meta.SetStatusCondition(&req.Status.Conditions, metav1.Condition{Type: "TargetEvicted", Status: metav1.ConditionTrue,
					Reason: "PodDeleted", Message: "handed off by " + name, ObservedGeneration: req.Generation})
				_, _ = requests.UpdateStatus(ctx, &req, metav1.UpdateOptions{})
				r.mu.Lock()
				r.handedOff = append(r.handedOff, pod.Name)
				r.mu.Unlock()
			}
			return false, nil
		})
	}()
	return r, func() { cancel(); <-done }
}

// TestDrainAsksEvictionRespondersToHandOff: the local control plane serves EvictionRequests
// (the alpha gate is on), so the drain asks for a pod that names an eviction responder
// through one. A responder that hands its pod off lets a single replica under a PDB of
// minAvailable 1, which no eviction could move, leave the node; a pod whose responder never
// answers is evicted (its replacement first) once handoffTimeout passes, its request
// withdrawn. No request is left after the drain.
func TestDrainAsksEvictionRespondersToHandOff(t *testing.T) {
	t.Parallel() // its own nodes, namespace and Deployments
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	sa := surgingRetirer(t, ns, rbacv1.PolicyRule{APIGroups: []string{"lifecycle.k8s.io"}, Resources: []string{"evictionrequests"},
		Verbs: []string{"get", "create", "update", "delete"}})
	retired := poolNode(t, ns)
	const answering, silent = "db.e2e.stepwise.dev/handoff", "cache.e2e.stepwise.dev/absent"
	deploymentOf(t, ns, "db", ns, map[string]string{"app": "db"}, withResponder(answering))
	budgetOfOne(t, ns, "db")
	deploymentOf(t, ns, "cache", ns, map[string]string{"app": "cache"}, withResponder(silent))
	poolNode(t, ns) // where the replacements go

	r, stop := respondFor(t, ns, answering)
	p := retirePipeline(ns, sa, retired, map[string]string{"timeout": "3m", "handoffTimeout": "5s"})
	p.Spec.Steps = p.Spec.Steps[:2] // cordon, drain
	_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	done := waitPipeline(t, ns, "retire", 3*time.Minute, func(p *v1alpha1.Pipeline) bool {
		return p.Status.Phase == v1alpha1.PipelineSucceeded || p.Status.Phase == v1alpha1.PipelineFailed
	})
	stop()
	require.Equal(t, v1alpha1.PipelineSucceeded, done.Status.Phase, "%+v", done.Status)

	r.mu.Lock()
	defer r.mu.Unlock()
	require.Len(t, r.seen, 2, "a request for each pod that names a responder: %+v", r.seen)
	intents := map[string]lifecyclev1alpha1.EvictionRequestIntent{}
	for _, req := range r.seen {
		assert.Equal(t, node.EvictionRequester, req.Spec.Requester)
		app, _, _ := strings.Cut(req.Spec.Target.Pod.Name, "-")
		intents[app] = req.Spec.Intent
		assert.Contains(t, done.Status.Steps[1].Created["evictionRequests"], ns+"/"+req.Name, "recorded before it was created, for teardown")
	}
	assert.Equal(t, map[string]lifecyclev1alpha1.EvictionRequestIntent{
		"db":    lifecyclev1alpha1.EvictionRequestIntentEviction,
		"cache": lifecyclev1alpha1.EvictionRequestIntentWithdrawn,
	}, intents, "db handed off; cache's responder never answered")
	require.Len(t, r.handedOff, 1)
	assert.True(t, strings.HasPrefix(r.handedOff[0], "db-"), r.handedOff)
	assert.Equal(t, "1", done.Status.Steps[1].Outputs[node.OutputPodsEvicted], "only cache was evicted: %+v", done.Status.Steps[1])

	left, err := cluster.Client.LifecycleV1alpha1().EvictionRequests(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, left.Items, "the drain deletes its requests when it ends")
}
