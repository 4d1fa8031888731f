package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

func readyNode(name string, age time.Duration, labels map[string]string) *unstructured.Unstructured {
	n := newNode(name, age, labels)
	setReady(n, "True")
	return n
}

func setReady(n *unstructured.Unstructured, status string) {
	n.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": status}}}
}

// TestUsageOf: what a NodeBudget counts unavailable, and what it allows.
func TestUsageOf(t *testing.T) {
	web := map[string]string{"pool": "web"}
	cordoned := readyNode("cordoned", 0, web)
	cordoned.Object["spec"] = map[string]any{"unschedulable": true}
	notReady := readyNode("unknown", 0, web)
	setReady(notReady, "Unknown")
	deleting := readyNode("deleting", 0, web)
	deleting.SetDeletionTimestamp(&metav1.Time{Time: time.Unix(0, 0)})
	retiring := &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{v1alpha1.LabelNodeBudget: "b"},
		Annotations: map[string]string{v1alpha1.AnnotationObject: "gone"}}}
	done := retiring.DeepCopy()
	done.Annotations[v1alpha1.AnnotationObject] = "done"
	done.Status.Phase = v1alpha1.PipelineSucceeded
	other := retiring.DeepCopy()
	other.Labels[v1alpha1.LabelNodeBudget] = "another"
	other.Annotations[v1alpha1.AnnotationObject] = "other"

	u, err := UsageOf(&v1alpha1.NodeBudget{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: v1alpha1.NodeBudgetSpec{MaxUnavailable: 5, NodeSelector: &v1alpha1.LabelSelector{MatchLabels: web}}}, []*unstructured.Unstructured{
		readyNode("fine", 0, web), cordoned, notReady, deleting, newNode("db", 0, map[string]string{"pool": "db"}),
	}, []*v1alpha1.Pipeline{retiring, done, other})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"cordoned": "cordoned", "unknown": "NotReady", "deleting": "being deleted", "gone": "retiring"}, u.Unavailable)
	assert.True(t, u.Allows("fine"), "4 of 5")
	u.Take("fine")
	assert.False(t, u.Allows("another"), "5 of 5")
	assert.True(t, u.Allows("cordoned"), "counted already")

	_, err = UsageOf(&v1alpha1.NodeBudget{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: v1alpha1.NodeBudgetSpec{
		NodeSelector: &v1alpha1.LabelSelector{MatchExpressions: []v1alpha1.LabelSelectorRequirement{{Key: "k", Operator: "In"}}}}}, nil, nil)
	assert.ErrorContains(t, err, "NodeBudget bad: nodeSelector")
}
