package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
)

// budgetTrigger is triggertest.Trigger naming the NodeBudget budget.
func budgetTrigger(budget string) *v1alpha1.PipelineTrigger {
	trig := triggertest.Trigger()
	trig.Spec.NodeBudgetRef = &v1alpha1.NodeBudgetRef{Name: budget}
	return trig
}

// startUnder is the pipeline trig makes for node, as it makes it.
func startUnder(trig *v1alpha1.PipelineTrigger, node *unstructured.Unstructured) *v1alpha1.Pipeline {
	p := PipelineFor(trig, node, map[string]string{"node": node.GetName()})
	p.UID = types.UID("uid-pipeline-" + node.GetName())
	return p
}

// lookup finds the triggers given, by namespace and UID, as the controller's index does.
func lookup(triggers ...*v1alpha1.PipelineTrigger) TriggerLookup {
	return func(namespace string, uid types.UID) *v1alpha1.PipelineTrigger {
		for _, trig := range triggers {
			if trig.Namespace == namespace && trig.UID == uid {
				return trig
			}
		}
		return nil
	}
}

// TestUsageOf: what a NodeBudget counts unavailable, and what it allows.
func TestUsageOf(t *testing.T) {
	web := map[string]string{"pool": "web"}
	cordoned := triggertest.ReadyNode("cordoned", 0, web)
	cordoned.Object["spec"] = map[string]any{"unschedulable": true}
	notReady := triggertest.ReadyNode("unknown", 0, web)
	triggertest.SetReady(notReady, "Unknown")
	deleting := triggertest.ReadyNode("deleting", 0, web)
	deleting.SetDeletionTimestamp(&metav1.Time{Time: time.Unix(0, 0)})
	trig := budgetTrigger("b")
	retiring := startUnder(trig, triggertest.ReadyNode("db-1", 0, nil)) // out of the selector: counted all the same
	done := startUnder(trig, triggertest.ReadyNode("db-2", 0, nil))
	done.Status.Phase = v1alpha1.PipelineSucceeded

	u, err := UsageOf(&v1alpha1.NodeBudget{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: v1alpha1.NodeBudgetSpec{MaxUnavailable: 5, NodeSelector: &v1alpha1.LabelSelector{MatchLabels: web}}}, []*unstructured.Unstructured{
		triggertest.ReadyNode("fine", 0, web), cordoned, notReady, deleting, triggertest.Node("db", 0, map[string]string{"pool": "db"}), triggertest.ReadyNode("db-1", 0, nil), triggertest.ReadyNode("db-2", 0, nil),
	}, []*v1alpha1.Pipeline{retiring, done}, lookup(trig))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"cordoned": "cordoned", "unknown": "NotReady", "deleting": "being deleted", "db-1": "retiring"}, u.Unavailable)
	assert.True(t, u.Allows("fine"), "4 of 5")
	u.Take("fine")
	assert.False(t, u.Allows("another"), "5 of 5")
	assert.True(t, u.Allows("cordoned"), "counted already")

	_, err = UsageOf(&v1alpha1.NodeBudget{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: v1alpha1.NodeBudgetSpec{
		NodeSelector: &v1alpha1.LabelSelector{MatchExpressions: []v1alpha1.LabelSelectorRequirement{{Key: "k", Operator: "In"}}}}}, nil, nil, lookup())
	assert.ErrorContains(t, err, "NodeBudget bad: nodeSelector")
}

// TestUsageOfCountsOnlyTheOperatorsStarts: a budget counts a pipeline only when a
// trigger of the pipeline's namespace, naming the budget and allowed to use it (the
// lookup finds it), started it; the node is the Node of the pipeline's object UID, by the
// Node's own name, and a start whose Node is gone is counted apart. Text a pipeline
// carries (its AnnotationObject) is never a node's name in the usage.
func TestUsageOfCountsOnlyTheOperatorsStarts(t *testing.T) {
	const forged = "INJECTED: call +1-555-0100"
	budget := &v1alpha1.NodeBudget{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}, Spec: v1alpha1.NodeBudgetSpec{MaxUnavailable: 3}}
	n1, n2 := triggertest.ReadyNode("n1", 0, nil), triggertest.ReadyNode("n2", 0, nil)
	gone := triggertest.ReadyNode("gone", 0, nil) // not among the nodes
	trig := budgetTrigger("fleet")
	other := budgetTrigger("fleet")
	other.Namespace, other.UID = "tenant", "uid-tenant-trigger"
	change := func(p *v1alpha1.Pipeline, f func(*v1alpha1.Pipeline)) *v1alpha1.Pipeline { f(p); return p }
	namedLikeAUID := triggertest.ReadyNode(string(gone.GetUID()), 0, nil)
	renewed := triggertest.ReadyNode("n1", 0, nil)
	renewed.SetUID("uid-n1-again")

	for _, tc := range []struct {
		name      string
		pipelines []*v1alpha1.Pipeline
		triggers  []*v1alpha1.PipelineTrigger
		// nodes are the cluster's; nil: n1 and n2.
		nodes []*unstructured.Unstructured
		// want is Unavailable (no node is NotReady); wantGone, Gone's size.
		want     map[string]string
		wantGone int
	}{
		{
			name:     "a start of a trigger naming the budget, by its Node's name, whatever its annotation says",
			triggers: []*v1alpha1.PipelineTrigger{trig},
			pipelines: []*v1alpha1.Pipeline{change(startUnder(trig, n1), func(p *v1alpha1.Pipeline) {
				// Still the trigger's own (its name is made of the part after the last /).
				p.Annotations[v1alpha1.AnnotationObject] = forged + "/n1"
			})},
			want: map[string]string{"n1": UnavailableRetiring},
		},
		{
			name:     "a start controlled by its trigger",
			triggers: []*v1alpha1.PipelineTrigger{trig},
			pipelines: []*v1alpha1.Pipeline{change(startUnder(trig, n1), func(p *v1alpha1.Pipeline) {
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "stepwise.dev/v1alpha1", Kind: "PipelineTrigger", Name: trig.Name,
					UID: trig.UID, Controller: ptr.To(true)}}
			})},
			want: map[string]string{"n1": UnavailableRetiring},
		},
		{
			name:     "a pipeline of another namespace with the budget's label and a node's name",
			triggers: []*v1alpha1.PipelineTrigger{trig},
			pipelines: []*v1alpha1.Pipeline{{ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: "tenant",
				Labels:      map[string]string{v1alpha1.LabelNodeBudget: "fleet", v1alpha1.LabelObjectUID: "uid-n2"},
				Annotations: map[string]string{v1alpha1.AnnotationObject: forged}}}},
			want: map[string]string{},
		},
		{
			name:      "a copy in another namespace of a start, its labels and all",
			triggers:  []*v1alpha1.PipelineTrigger{trig},
			pipelines: []*v1alpha1.Pipeline{change(startUnder(trig, n1), func(p *v1alpha1.Pipeline) { p.Namespace = "tenant" })},
			want:      map[string]string{},
		},
		{
			name:     "a start of a trigger of another namespace that the lookup does not find (its use denied)",
			triggers: nil,
			pipelines: []*v1alpha1.Pipeline{change(startUnder(other, n1), func(p *v1alpha1.Pipeline) {
				p.Annotations[v1alpha1.AnnotationObject] = forged
			})},
			want: map[string]string{},
		},
		{
			name:      "a start of a trigger of another namespace that may use the budget",
			triggers:  []*v1alpha1.PipelineTrigger{trig, other},
			pipelines: []*v1alpha1.Pipeline{startUnder(other, n2)},
			want:      map[string]string{"n2": UnavailableRetiring},
		},
		{
			name:      "a pipeline of a trigger that names another budget",
			triggers:  []*v1alpha1.PipelineTrigger{budgetTrigger("elsewhere")},
			pipelines: []*v1alpha1.Pipeline{startUnder(trig, n1)},
			want:      map[string]string{},
		},
		{
			name:      "a pipeline labelled with the UID of an earlier trigger of the same name",
			triggers:  []*v1alpha1.PipelineTrigger{trig},
			pipelines: []*v1alpha1.Pipeline{change(startUnder(trig, n1), func(p *v1alpha1.Pipeline) { p.Labels[v1alpha1.LabelTriggerUID] = "uid-earlier" })},
			want:      map[string]string{},
		},
		{
			name:      "a pipeline without a trigger's UID",
			triggers:  []*v1alpha1.PipelineTrigger{trig},
			pipelines: []*v1alpha1.Pipeline{change(startUnder(trig, n1), func(p *v1alpha1.Pipeline) { delete(p.Labels, v1alpha1.LabelTriggerUID) })},
			want:      map[string]string{},
		},
		{
			name:     "a pipeline controlled by another object",
			triggers: []*v1alpha1.PipelineTrigger{trig},
			pipelines: []*v1alpha1.Pipeline{change(startUnder(trig, n1), func(p *v1alpha1.Pipeline) {
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: trig.UID, Controller: ptr.To(true)}}
			})},
			want: map[string]string{},
		},
		{
			name:      "a start whose Node is gone is counted, not named",
			triggers:  []*v1alpha1.PipelineTrigger{trig},
			pipelines: []*v1alpha1.Pipeline{startUnder(trig, gone)},
			want:      map[string]string{}, wantGone: 1,
		},
		{
			name:     "two starts for one gone Node count it once, apart from a Node named like its UID",
			triggers: []*v1alpha1.PipelineTrigger{trig, other},
			nodes:    []*unstructured.Unstructured{n1, n2, namedLikeAUID},
			pipelines: []*v1alpha1.Pipeline{startUnder(trig, gone), startUnder(other, gone),
				startUnder(trig, namedLikeAUID)},
			want: map[string]string{namedLikeAUID.GetName(): UnavailableRetiring}, wantGone: 1,
		},
		{
			name:      "a start for a Node deleted and created again under its name",
			triggers:  []*v1alpha1.PipelineTrigger{trig},
			nodes:     []*unstructured.Unstructured{renewed, n2},
			pipelines: []*v1alpha1.Pipeline{startUnder(trig, n1)}, // the old Node's UID
			want:      map[string]string{}, wantGone: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := tc.nodes
			if nodes == nil {
				nodes = []*unstructured.Unstructured{n1, n2}
			}
			u, err := UsageOf(budget, nodes, tc.pipelines, lookup(tc.triggers...))
			require.NoError(t, err)
			assert.Equal(t, tc.want, u.Unavailable)
			assert.Len(t, u.Gone, tc.wantGone)
			assert.Equal(t, len(tc.want)+tc.wantGone, u.Count())
			for node := range u.Unavailable {
				assert.NotContains(t, node, "INJECTED")
			}
		})
	}
}
