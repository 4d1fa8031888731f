package trigger

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
)

// serviceAccountNodes serves the Node patches made as a trigger's ServiceAccount: each is
// applied to the node the fake dynamic client holds (so the controller's informer sees it)
// and recorded, as "ServiceAccount node".
type serviceAccountNodes struct {
	f       *fixture
	kube    *kubefake.Clientset
	patched []string
	// as is the ServiceAccount the last clients were asked for.
	as string
	// forbidden refuses every patch.
	forbidden bool
}

func (s *serviceAccountNodes) ForServiceAccount(namespace, name string) (*executor.Clients, error) {
	s.as = namespace + "/" + name
	return &executor.Clients{Kube: s.kube}, nil
}

func (s *serviceAccountNodes) react(action clienttesting.Action) (bool, runtime.Object, error) {
	patch := action.(clienttesting.PatchAction)
	if s.forbidden {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, patch.GetName(), nil)
	}
	var body struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Spec struct {
			Taints []corev1.Taint `json:"taints"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(patch.GetPatch(), &body); err != nil {
		return true, nil, err
	}
	nodes := s.f.dynamic.Resource(nodesGVR)
	node, err := nodes.Get(s.f.ctx, patch.GetName(), metav1.GetOptions{})
	if err != nil {
		return true, nil, err
	}
	if node.GetResourceVersion() != body.Metadata.ResourceVersion {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, patch.GetName(), nil)
	}
	taints, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&corev1.NodeSpec{Taints: body.Spec.Taints})
	if err != nil {
		return true, nil, err
	}
	if list, ok := taints["taints"]; ok {
		require.NoError(s.f.t, unstructured.SetNestedField(node.Object, list, "spec", "taints"))
	} else {
		unstructured.RemoveNestedField(node.Object, "spec", "taints")
	}
	s.f.updateObject(node)
	s.patched = append(s.patched, s.as+" "+patch.GetName())
	return true, &corev1.Node{}, nil
}

func withServiceAccountNodes(s *serviceAccountNodes) fixtureOption {
	return func(cfg *Config) { cfg.Clients = s }
}

// waitingTaints are the values of the waiting taints of the nodes, by node.
func (f *fixture) waitingTaints() map[string]string {
	f.t.Helper()
	list, err := f.dynamic.Resource(nodesGVR).List(f.ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	out := map[string]string{}
	for _, n := range list.Items {
		taints, err := taintsOf(&n)
		require.NoError(f.t, err)
		for _, t := range taints {
			if t.Key == v1alpha1.TaintWaiting {
				assert.Equal(f.t, corev1.TaintEffectPreferNoSchedule, t.Effect)
				out[n.GetName()] = t.Value
			}
		}
	}
	return out
}

func newTaintFixture(t testing.TB, trig *v1alpha1.PipelineTrigger, nodes ...runtime.Object) (*fixture, *serviceAccountNodes) {
	sa := &serviceAccountNodes{kube: kubefake.NewClientset()}
	f := newFixture(t, append(objs(trig, newTemplate("retire-node")), nodes...), withServiceAccountNodes(sa))
	sa.f = f
	sa.kube.PrependReactor("patch", "nodes", sa.react)
	return f, sa
}

// TestWaitingNodesAreTainted: with taintWaiting, the nodes waiting in the queue carry
// stepwise.dev/waiting:PreferNoSchedule, put there as the trigger's ServiceAccount; a
// node loses it when its pipeline starts; a node tainted by another trigger is left alone;
// turning taintWaiting off removes the taints, then the finalizer.
func TestWaitingNodesAreTainted(t *testing.T) {
	a := triggertest.Node("a", 0, retiring)
	b := triggertest.Node("b", time.Second, retiring)
	c := triggertest.Node("c", 2*time.Second, retiring)
	other := triggertest.Node("other", 0, nil)
	require.NoError(t, unstructured.SetNestedSlice(other.Object, []any{
		map[string]any{"key": v1alpha1.TaintWaiting, "value": "elsewhere.retire", "effect": "PreferNoSchedule"},
	}, "spec", "taints"))
	trig := triggertest.Trigger()
	trig.Spec.TaintWaiting = true
	f, sa := newTaintFixture(t, trig, a, b, c, other)

	f.sync("retire")
	f.pipelineFor("retire", a)
	assert.Equal(t, map[string]string{"b": "ns.retire", "c": "ns.retire", "other": "elsewhere.retire"}, f.waitingTaints())
	assert.ElementsMatch(t, []string{"ns/retirer b", "ns/retirer c"}, sa.patched, "as the trigger's ServiceAccount")
	assert.Contains(t, f.trigger("retire").Finalizers, v1alpha1.FinalizerTaints)

	// Nothing changed: nothing is written.
	sa.patched = nil
	f.client.ClearActions()
	f.sync("retire")
	assert.Empty(t, sa.patched)
	assert.Empty(t, f.writes())

	// a finishes: b starts and loses its taint.
	f.finish("retire", a)
	f.sync("retire")
	f.pipelineFor("retire", b)
	assert.Equal(t, map[string]string{"c": "ns.retire", "other": "elsewhere.retire"}, f.waitingTaints())
	assert.Equal(t, []string{"ns/retirer b"}, sa.patched)

	// Off: the taints go, then the finalizer.
	f.updateTrigger("retire", func(tr *v1alpha1.PipelineTrigger) { tr.Spec.TaintWaiting = false })
	f.sync("retire")
	assert.Equal(t, map[string]string{"other": "elsewhere.retire"}, f.waitingTaints())
	assert.NotContains(t, f.trigger("retire").Finalizers, v1alpha1.FinalizerTaints)
}

// TestDeletedTriggerRemovesItsTaints: a trigger being deleted takes its taints off every
// node, then its finalizer; one it may no longer patch does not hold the deletion.
func TestDeletedTriggerRemovesItsTaints(t *testing.T) {
	for _, forbidden := range []bool{false, true} {
		t.Run(map[bool]string{false: "allowed", true: "forbidden"}[forbidden], func(t *testing.T) {
			a := triggertest.Node("a", 0, retiring)
			require.NoError(t, unstructured.SetNestedSlice(a.Object, []any{
				map[string]any{"key": "other", "effect": "NoSchedule"},
				map[string]any{"key": v1alpha1.TaintWaiting, "value": "ns.retire", "effect": "PreferNoSchedule"},
			}, "spec", "taints"))
			trig := triggertest.Trigger()
			trig.Spec.TaintWaiting = true
			trig.Finalizers = []string{v1alpha1.FinalizerTaints, "example.com/other"}
			trig.DeletionTimestamp = &metav1.Time{Time: start}
			f, sa := newTaintFixture(t, trig, a)
			sa.forbidden = forbidden

			f.sync("retire")
			assert.Equal(t, []string{"example.com/other"}, f.trigger("retire").Finalizers)
			if forbidden {
				assert.Equal(t, map[string]string{"a": "ns.retire"}, f.waitingTaints())
				assert.Equal(t, []string{"Warning TaintFailed"}, f.eventReasons())
				return
			}
			assert.Empty(t, f.waitingTaints())
			taints, err := taintsOf(f.nodeObject("a"))
			require.NoError(t, err)
			assert.Equal(t, []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoSchedule}}, taints, "other taints stay")
			assert.Empty(t, f.pipelineList(), "a trigger being deleted starts nothing")
		})
	}
}

// TestTaintRefusedIsReported: a ServiceAccount that may not patch Nodes leaves them
// untainted; the trigger goes on, says so in its Ready message and a Warning Event.
func TestTaintRefusedIsReported(t *testing.T) {
	trig := triggertest.Trigger()
	trig.Spec.TaintWaiting = true
	f, sa := newTaintFixture(t, trig, triggertest.Node("a", 0, retiring), triggertest.Node("b", time.Second, retiring))
	sa.forbidden = true

	f.sync("retire")
	assert.Len(t, f.pipelineList(), 1, "the trigger goes on")
	assert.Empty(t, f.waitingTaints())
	ready := readyOf(f.trigger("retire"))
	assert.Equal(t, v1alpha1.TriggerReasonActive, ready.Reason)
	assert.Contains(t, ready.Message, "waiting nodes are not all tainted as they should be: ")
	assert.Contains(t, ready.Message, "forbidden")
	assert.Contains(t, f.eventReasons(), "Warning TaintFailed")
}

func (f *fixture) nodeObject(name string) *unstructured.Unstructured {
	f.t.Helper()
	n, err := f.dynamic.Resource(nodesGVR).Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return n
}
