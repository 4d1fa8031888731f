package node

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
)

func conditionsOf(t *testing.T, client *fake.Clientset) map[corev1.NodeConditionType]corev1.NodeCondition {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	require.NoError(t, err)
	out := map[corev1.NodeConditionType]corev1.NodeCondition{}
	for _, c := range n.Status.Conditions {
		out[c.Type] = c
	}
	return out
}

// TestDrainSaysOnTheNodeThatItDrainsIt: the Node's DrainInProgress and Drained conditions
// follow the drain (in progress while pods are left, drained at the end), a kubelet's
// condition stays, and the drain's teardown clears what it set.
func TestDrainSaysOnTheNodeThatItDrainsIt(t *testing.T) {
	ctx := context.Background()
	clock := testingclock.NewFakeClock(time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC))
	n := newNode("n1", true, nil)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	client := fake.NewClientset(n, managedPod("web-1"))
	readsEverything(client)
	evictions(client, map[string]bool{"web-1": true})
	d := Drain{Clock: clock}
	req := request(t, d, client, map[string]string{"node": "n1"})

	_, err := d.Create(ctx, req)
	require.NoError(t, err)
	got := conditionsOf(t, client)
	assert.Equal(t, corev1.ConditionTrue, got[corev1.NodeDrainInProgress].Status)
	assert.Equal(t, ReasonDrainStarted, got[corev1.NodeDrainInProgress].Reason)
	assert.Equal(t, "pipeline ops/retire, step step", got[corev1.NodeDrainInProgress].Message)
	assert.Equal(t, corev1.ConditionFalse, got[corev1.NodeDrained].Status)
	assert.Equal(t, "KubeletReady", got[corev1.NodeReady].Reason, "the kubelet's condition stays")
	started := got[corev1.NodeDrainInProgress].LastTransitionTime

	// Another call changes nothing on the Node.
	clock.Step(time.Minute)
	before := len(client.Actions())
	_, err = d.Create(ctx, req)
	require.NoError(t, err)
	for _, a := range client.Actions()[before:] {
		assert.False(t, a.GetVerb() == "patch" && a.GetResource().Resource == "nodes", "patched the node again")
	}

	require.NoError(t, client.CoreV1().Pods("apps").Delete(ctx, "web-1", metav1.DeleteOptions{}))
	res, err := d.Create(ctx, req)
	require.NoError(t, err)
	require.True(t, res.Done)
	got = conditionsOf(t, client)
	assert.Equal(t, corev1.ConditionFalse, got[corev1.NodeDrainInProgress].Status)
	assert.NotEqual(t, started, got[corev1.NodeDrainInProgress].LastTransitionTime)
	assert.Equal(t, corev1.ConditionTrue, got[corev1.NodeDrained].Status)
	assert.Equal(t, ReasonDrainFinished, got[corev1.NodeDrained].Reason)

	_, err = d.Delete(ctx, req)
	require.NoError(t, err)
	got = conditionsOf(t, client)
	assert.Equal(t, corev1.ConditionFalse, got[corev1.NodeDrained].Status)
	assert.Equal(t, ReasonDrainUndone, got[corev1.NodeDrained].Reason)
}

// TestDrainWithoutTheRightToSetNodeConditionsGoesOn: a ServiceAccount that may not patch
// nodes/status drains all the same, and the message says the conditions are not set.
func TestDrainWithoutTheRightToSetNodeConditionsGoesOn(t *testing.T) {
	client := fake.NewClientset(newNode("n1", true, nil))
	forbidden(client, "patch", "nodes")
	d := Drain{}
	res, err := d.Create(context.Background(), request(t, d, client, map[string]string{"node": "n1"}))
	require.NoError(t, err)
	assert.True(t, res.Done)
	assert.Equal(t, "node drained, 0 pods evicted; the Node's DrainInProgress and Drained conditions are not set: "+
		"the pipeline's ServiceAccount may not patch nodes/status", res.Message)
}
