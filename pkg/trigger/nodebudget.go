package trigger

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// budgetLocks serialises the starts under each NodeBudget: two triggers naming one budget
// sync on two workers, and each must count the other's last start before its own. The
// pipelines cache (a mutation cache that includes our own creates) shows a start at once
// to the next holder of the lock.
type budgetLocks struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

func (b *budgetLocks) lock(name string) func() {
	b.mu.Lock()
	if b.locks == nil {
		b.locks = map[string]*sync.Mutex{}
	}
	l, ok := b.locks[name]
	if !ok {
		l = &sync.Mutex{}
		b.locks[name] = l
	}
	b.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// nodeBudget is the NodeBudget a trigger's starts count against, as one sync sees it. Its
// usage is counted, under the budget's lock, when the first start needs it, and the lock
// is held until the sync's starts are done.
type nodeBudget struct {
	budget *v1alpha1.NodeBudget
	// counted: usage holds; unlock releases the lock.
	counted bool
	usage   rules.BudgetUsage
	unlock  func()
	// full: an object waited because the budget was full, or err, could not be counted.
	full bool
	err  error
}

// findNodeBudget finds the NodeBudget the trigger names, in the cache.
func (ts *triggerSync) findNodeBudget() error {
	ref := ts.trig.Spec.NodeBudgetRef
	if ref == nil {
		return nil
	}
	budget, err := ts.c.nodeBudgets.Get(ref.Name)
	switch {
	case apierrors.IsNotFound(err):
		ts.budgetMissing = true // the budgets' informer queues the trigger when it appears
		return nil
	case err != nil:
		return fmt.Errorf("get NodeBudget %s from cache: %w", ref.Name, err)
	}
	ts.nodeBudget = &nodeBudget{budget: budget}
	return nil
}

// budgetAllows tells whether the node may start under the trigger's NodeBudget (true for
// a trigger naming none). It takes the budget's lock the first time, until releaseBudget.
// A budget that cannot be counted (its selector does not parse) allows nothing.
func (ts *triggerSync) budgetAllows(node *unstructured.Unstructured) bool {
	nb := ts.nodeBudget
	if nb == nil {
		return true
	}
	if !nb.counted {
		nb.unlock = ts.c.budgetLocks.lock(nb.budget.Name)
		nb.usage, nb.err = ts.countBudget(nb.budget)
		nb.counted = true
	}
	if nb.err == nil && nb.usage.Allows(node.GetName()) {
		return true
	}
	nb.full = true
	return false
}

// tookBudget counts a node the trigger started as retiring under its budget.
func (ts *triggerSync) tookBudget(node *unstructured.Unstructured) {
	if nb := ts.nodeBudget; nb != nil && nb.counted && nb.err == nil {
		nb.usage.Take(node.GetName())
	}
}

// releaseBudget releases the budget's lock, when taken.
func (ts *triggerSync) releaseBudget() {
	if nb := ts.nodeBudget; nb != nil && nb.unlock != nil {
		nb.unlock()
		nb.unlock = nil
	}
}

// countBudget counts the nodes the budget counts unavailable, from the caches: every
// Node (the trigger's own kind's informer) and the starts under the budget in every
// namespace (rules.StartedUnder), the trigger's own included: this sync found it may use
// the budget.
func (ts *triggerSync) countBudget(budget *v1alpha1.NodeBudget) (rules.BudgetUsage, error) {
	items, err := ts.lister.List(labels.Everything())
	if err != nil {
		return rules.BudgetUsage{}, fmt.Errorf("list nodes from cache: %w", err)
	}
	nodes := make([]*unstructured.Unstructured, 0, len(items))
	for _, item := range items {
		if n, ok := item.(*unstructured.Unstructured); ok {
			nodes = append(nodes, n)
		}
	}
	objs, err := ts.c.pipelines.ByIndex(pipelineBudgetIndex, rules.NodeBudgetLabelOf(budget.Name))
	if err != nil {
		return rules.BudgetUsage{}, fmt.Errorf("find pipelines of NodeBudget %s in cache: %w", budget.Name, err)
	}
	pipelines := make([]*v1alpha1.Pipeline, 0, len(objs))
	for _, obj := range objs {
		if p, ok := obj.(*v1alpha1.Pipeline); ok {
			pipelines = append(pipelines, p)
		}
	}
	return rules.UsageOf(budget, nodes, pipelines, func(namespace string, uid types.UID) *v1alpha1.PipelineTrigger {
		if namespace == ts.trig.Namespace && uid == ts.trig.UID {
			return ts.trig
		}
		return ts.c.budgetTrigger(namespace, uid)
	})
}

// budgetTrigger is the trigger of namespace with uid, whose starts a NodeBudget may count:
// nil when there is none, or when the last answer on its rights kept for it denied it.
func (c *Controller) budgetTrigger(namespace string, uid types.UID) *v1alpha1.PipelineTrigger {
	if uid == "" {
		return nil
	}
	objs, err := c.triggerIndexer.ByIndex(triggerUIDIndex, namespace+"/"+string(uid))
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("find trigger %s/%s by UID: %w", namespace, uid, err))
		return nil
	}
	for _, obj := range objs {
		if trig, ok := obj.(*v1alpha1.PipelineTrigger); ok && trig.Namespace == namespace && trig.UID == uid {
			if c.access.denied(trig) {
				return nil
			}
			return trig
		}
	}
	return nil
}

// budgetMessage says what fills the budget: its count, the first nodes, with why, and how
// many of its starts' Nodes are gone (counted, not named: a gone node's only name is text
// its pipeline carries).
func (ts *triggerSync) budgetMessage() string {
	nb := ts.nodeBudget
	if nb.err != nil {
		return fmt.Sprintf("NodeBudget %s cannot be counted: %v", nb.budget.Name, nb.err)
	}
	names := make([]string, 0, len(nb.usage.Unavailable))
	for node := range nb.usage.Unavailable {
		names = append(names, node)
	}
	slices.Sort(names)
	const shown = 5
	described := make([]string, 0, shown+2)
	for _, node := range names[:min(len(names), shown)] {
		described = append(described, node+" ("+nb.usage.Unavailable[node]+")")
	}
	if more := len(names) - shown; more > 0 {
		described = append(described, fmt.Sprintf("and %d more", more))
	}
	if gone := len(nb.usage.Gone); gone > 0 {
		described = append(described, fmt.Sprintf("%d retiring whose Node is gone", gone))
	}
	return fmt.Sprintf("NodeBudget %s is full: %d of %d nodes unavailable: %s", nb.budget.Name, nb.usage.Count(), nb.usage.Max,
		strings.Join(described, ", "))
}
