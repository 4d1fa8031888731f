package rules

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

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

// BudgetUsage is what a NodeBudget allows and what it counts unavailable: nodes by name,
// each with why (UnavailableNotReady, ...), and apart, by the UID of their object, the
// starts under the budget whose Node is gone. Those are kept out of Unavailable so that no
// key of theirs can be taken for a node's name, and are reported as a count: the only name
// of a gone node is text a pipeline carries.
type BudgetUsage struct {
	Max         int
	Unavailable map[string]string
	Gone        map[types.UID]bool
}

// TriggerLookup finds the PipelineTrigger of a namespace by its UID: nil when there is
// none, or when the caller knows its ServiceAccount may not use the budget (its access
// review denied it).
type TriggerLookup func(namespace string, uid types.UID) *v1alpha1.PipelineTrigger

// UsageOf counts what a budget counts unavailable: the nodes its selector chooses that
// are NotReady, cordoned or being deleted, and the node of every unfinished start under
// the budget (StartedUnder), whether or not it matches the selector. That node is the
// Node whose UID the pipeline's LabelObjectUID names, under the name the Node has; a
// start whose Node is gone still counts, in Gone. Pass every Node, the pipelines labelled
// with the budget, from every namespace, and the lookup of their triggers.
func UsageOf(budget *v1alpha1.NodeBudget, nodes []*unstructured.Unstructured, pipelines []*v1alpha1.Pipeline,
	triggerOf TriggerLookup) (BudgetUsage, error) {
	selector, err := SelectorOf(budget.Spec.NodeSelector)
	if err != nil {
		return BudgetUsage{}, fmt.Errorf("NodeBudget %s: nodeSelector: %w", budget.Name, err)
	}
	u := BudgetUsage{Max: int(budget.Spec.MaxUnavailable), Unavailable: map[string]string{}, Gone: map[types.UID]bool{}}
	names := make(map[types.UID]string, len(nodes))
	for _, n := range nodes {
		names[n.GetUID()] = n.GetName()
		if !selector.Matches(labels.Set(n.GetLabels())) {
			continue
		}
		if why := NodeUnavailable(n); why != "" {
			u.Unavailable[n.GetName()] = why
		}
	}
	for _, p := range pipelines {
		uid := types.UID(p.Labels[v1alpha1.LabelTriggerUID])
		if p.Finished() || uid == "" || !StartedUnder(budget.Name, triggerOf(p.Namespace, uid), p) {
			continue
		}
		object := ObjectUIDOf(p)
		if name, ok := names[object]; ok && object != "" {
			u.Unavailable[name] = UnavailableRetiring
			continue
		}
		if object == "" {
			object = p.UID // not made by a trigger of ours, which labels it; counted all the same
		}
		u.Gone[object] = true
	}
	return u, nil
}

// StartedUnder tells whether a pipeline is one the operator started under the NodeBudget
// named budget, for trig, its trigger: a NodeBudget counts only these, so that a tenant
// who may create pipelines, but not use the budget, cannot fill it. It is when trig names
// the budget, the pipeline carries the budget's LabelNodeBudget and is trig's own
// (OwnershipOf: in trig's namespace, with its name and UID, under the name trig gives
// it), and a controller the pipeline names, if any, is trig: trig's pipelines name none,
// and one controlled by another object is that object's. A pipeline made before
// LabelTriggerUID (Adoptable) is not: none carried LabelNodeBudget.
func StartedUnder(budget string, trig *v1alpha1.PipelineTrigger, p *v1alpha1.Pipeline) bool {
	if trig == nil || trig.Spec.NodeBudgetRef == nil || trig.Spec.NodeBudgetRef.Name != budget ||
		p.Labels[v1alpha1.LabelNodeBudget] != NodeBudgetLabelOf(budget) || OwnershipOf(trig, p, "") != Owned {
		return false
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		return err == nil && gv.Group == v1alpha1.SchemeGroupVersion.Group && ref.Kind == "PipelineTrigger" &&
			ref.Name == trig.Name && ref.UID == trig.UID
	}
	return true
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
	return u.Count() < u.Max
}

// Count is how many nodes the budget counts unavailable.
func (u BudgetUsage) Count() int { return len(u.Unavailable) + len(u.Gone) }

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
