package rules

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// Why a node counts against a NodeBudget.
const (
	UnavailableNotReady      = "NotReady"
	UnavailableUnschedulable = "cordoned"
	UnavailableDeleting      = "being deleted"
	UnavailableRetiring      = "retiring"
)

// NodeBudgetLabelOf is the value of LabelNodeBudget for the budget named name (a label
// value is at most 63 characters; a budget's name may be longer).
func NodeBudgetLabelOf(name string) string { return labelValue(name) }

// BudgetUsage is what a NodeBudget allows and the nodes it counts unavailable, each with
// why (UnavailableNotReady, ...).
type BudgetUsage struct {
	Max         int
	Unavailable map[string]string
}

// UsageOf counts the nodes a budget counts unavailable: those its selector chooses that
// are NotReady, cordoned or being deleted, and the node of every unfinished pipeline
// started under the budget (LabelNodeBudget), whether or not its node still exists or
// matches. Pass the pipelines labelled with the budget, from every namespace.
func UsageOf(budget *v1alpha1.NodeBudget, nodes []*unstructured.Unstructured, pipelines []*v1alpha1.Pipeline) (BudgetUsage, error) {
	selector, err := SelectorOf(budget.Spec.NodeSelector)
	if err != nil {
		return BudgetUsage{}, fmt.Errorf("NodeBudget %s: nodeSelector: %w", budget.Name, err)
	}
	u := BudgetUsage{Max: int(budget.Spec.MaxUnavailable), Unavailable: map[string]string{}}
	for _, n := range nodes {
		if !selector.Matches(labels.Set(n.GetLabels())) {
			continue
		}
		if why := NodeUnavailable(n); why != "" {
			u.Unavailable[n.GetName()] = why
		}
	}
	label := NodeBudgetLabelOf(budget.Name)
	for _, p := range pipelines {
		if p.Labels[v1alpha1.LabelNodeBudget] != label || p.Finished() {
			continue
		}
		if node := p.Annotations[v1alpha1.AnnotationObject]; node != "" {
			u.Unavailable[node] = UnavailableRetiring
		}
	}
	return u, nil
}

// SelectorOf parses a selector of the API; none selects everything (metav1's parser
// selects nothing for a nil one).
func SelectorOf(s *v1alpha1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s.AsMeta())
}

// NodeUnavailable is why a node counts as unavailable, "" when it does not: its Ready
// condition is not True (a node without one has not proved it is ready), it is
// unschedulable, or it is being deleted.
func NodeUnavailable(n *unstructured.Unstructured) string {
	switch {
	case n.GetDeletionTimestamp() != nil:
		return UnavailableDeleting
	case !nodeReady(n):
		return UnavailableNotReady
	}
	if cordoned, _, _ := unstructured.NestedBool(n.Object, "spec", "unschedulable"); cordoned {
		return UnavailableUnschedulable
	}
	return ""
}

func nodeReady(n *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(n.Object, "status", "conditions")
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Ready" {
			return m["status"] == "True"
		}
	}
	return false
}

// Allows tells whether the node may start under the budget: it counts already (it is
// unavailable: retiring it takes nothing more), or one more leaves the count within Max.
func (u BudgetUsage) Allows(node string) bool {
	if _, counted := u.Unavailable[node]; counted {
		return true
	}
	return len(u.Unavailable) < u.Max
}

// Take counts the node as retiring under the budget.
func (u BudgetUsage) Take(node string) { u.Unavailable[node] = UnavailableRetiring }

// FinishedAt is when a finished pipeline finished: when its last step succeeded, or when
// it failed (FailedAt); the zero time for one that has not.
func FinishedAt(p *v1alpha1.Pipeline) time.Time {
	switch {
	case !p.Finished():
		return time.Time{}
	case p.Status.Phase == v1alpha1.PipelineSucceeded && p.Status.CompletionTime != nil:
		return p.Status.CompletionTime.Time
	case p.Status.Phase == v1alpha1.PipelineSucceeded:
		return p.CreationTimestamp.Time
	}
	return FailedAt(p)
}
