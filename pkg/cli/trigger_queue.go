package cli

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/pager"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/objectref"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// triggerQueue is what a trigger would do now, read with the user's credentials as the
// trigger reads it with its ServiceAccount's.
type triggerQueue struct {
	trig *v1alpha1.PipelineTrigger
	// unfinished counts the trigger's pipelines that hold a place in its concurrency.
	unfinished int
	// started are the matching objects that have a pipeline already, in the order of
	// matching; waiting those without one.
	started []string
	waiting []waitingObject
	// blocked says why nothing starts now, when nothing does.
	blocked string
}

// waitingObject is a matching object without a pipeline, with the trigger's params bound to
// it, or why they do not bind (such an object waits without taking a place).
type waitingObject struct {
	name   string
	obj    *unstructured.Unstructured
	params map[string]string
	err    error
}

// concurrency is the trigger's concurrency, as the trigger counts it.
func (q *triggerQueue) concurrency() int { return rules.Concurrency(q.trig) }

// free is how many pipelines the trigger would start now.
func (q *triggerQueue) free() int {
	if q.blocked != "" {
		return 0
	}
	return rules.Free(q.trig, q.unfinished)
}

// startable are the waiting objects whose params bind, in order: those the trigger starts
// as places free up.
func (q *triggerQueue) startable() []waitingObject {
	var out []waitingObject
	for _, w := range q.waiting {
		if w.err == nil {
			out = append(out, w)
		}
	}
	return out
}

// readTriggerQueue reads the trigger, its template, the objects it matches and its
// pipelines, and finds in which order it would start the objects that have none, by the
// trigger's own rules (package rules).
func readTriggerQueue(ctx context.Context, c *Clients, ns, name string) (*triggerQueue, error) {
	trig, err := c.Stepwise.StepwiseV1alpha1().PipelineTriggers(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get trigger %s/%s: %w", ns, name, err)
	}
	tmpl := trig.Spec.TemplateRef.Name
	if _, err := c.Stepwise.StepwiseV1alpha1().PipelineTemplates(ns).Get(ctx, tmpl, metav1.GetOptions{}); err != nil {
		return nil, fmt.Errorf("get template %s/%s of trigger %s: %w", ns, tmpl, name, err)
	}
	// What makes the trigger invalid as a whole makes plan fail too.
	matcher, err := rules.ParseMatcher(trig)
	if err != nil {
		return nil, fmt.Errorf("trigger %s/%s: %w", ns, name, err)
	}
	params, err := objectref.Parse(trig.Spec.Params)
	if err != nil {
		return nil, fmt.Errorf("trigger %s/%s: %w", ns, name, err)
	}
	objects, err := listMatching(ctx, c, trig, matcher)
	if err != nil {
		return nil, err
	}

	list, err := c.Stepwise.StepwiseV1alpha1().Pipelines(ns).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{v1alpha1.LabelTrigger: rules.LabelValueOf(trig.Name)}).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list the pipelines of trigger %s/%s: %w", ns, name, err)
	}
	var owned []*v1alpha1.Pipeline
	for i := range list.Items {
		// An earlier trigger's of the same name, or a copy, is not counted: the trigger
		// leaves it. Nor is an old version's until the operator adopted it: only the
		// operator knows the user it acts as, which adoption checks.
		if p := &list.Items[i]; rules.OwnershipOf(trig, p, "") != rules.NotOwned {
			owned = append(owned, p)
		}
	}
	q := &triggerQueue{trig: trig, unfinished: rules.Unfinished(owned)}
	byObject := rules.ByObject(owned)
	for _, obj := range objects {
		key := rules.ObjectKey(obj.GetNamespace(), obj.GetName())
		if _, started := byObject[obj.GetUID()]; started {
			q.started = append(q.started, key)
			continue
		}
		bound, err := params.Bind(obj)
		q.waiting = append(q.waiting, waitingObject{name: key, obj: obj, params: bound, err: err})
	}
	q.blocked = blockedBecause(trig)
	return q, nil
}

// listMatching lists, with the user's credentials, the objects of the trigger's kind in its
// scope (the trigger's namespace for a namespaced kind, the cluster for a cluster-scoped
// one) that its selector and matchFields match, in the trigger's order of matching. An
// object being deleted counts as gone, and a Pipeline a trigger made is none.
func listMatching(ctx context.Context, c *Clients, trig *v1alpha1.PipelineTrigger, matcher *rules.Matcher) ([]*unstructured.Unstructured, error) {
	res := trig.Spec.Resource
	gv, err := schema.ParseGroupVersion(res.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("trigger %s/%s: spec.resource.apiVersion: %w", trig.Namespace, trig.Name, err)
	}
	mapping, err := c.Mapper.RESTMapping(gv.WithKind(res.Kind).GroupKind(), gv.Version)
	if err != nil {
		return nil, fmt.Errorf("find the resource of %s %s: %w", res.APIVersion, res.Kind, err)
	}
	var ri dynamic.ResourceInterface = c.Dynamic.Resource(mapping.Resource)
	scope := "the cluster"
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = c.Dynamic.Resource(mapping.Resource).Namespace(trig.Namespace)
		scope = "namespace " + trig.Namespace
	}
	var objects []*unstructured.Unstructured
	list := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return ri.List(ctx, opts)
	})
	err = list.EachListItem(ctx, metav1.ListOptions{LabelSelector: matcher.Selector().String()}, func(item runtime.Object) error {
		obj, ok := item.(*unstructured.Unstructured)
		if ok && rules.Eligible(mapping.Resource.GroupResource(), obj) && matcher.Matches(obj) {
			objects = append(objects, obj)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s in %s: %w", mapping.Resource.GroupResource(), scope, err)
	}
	slices.SortFunc(objects, rules.CompareObjects)
	return objects, nil
}

// blockedBecause says why the trigger starts nothing now, as its status says: the first
// blocker that holds every start (rules.HoldsEveryStart), or Ready False.
func blockedBecause(trig *v1alpha1.PipelineTrigger) string {
	for _, b := range trig.Status.BlockedBy {
		if !rules.HoldsEveryStart(b) {
			continue
		}
		what := b.Kind
		if b.Name != "" {
			what += " " + b.Name
		}
		return fmt.Sprintf("the trigger waits (%s: %s)", what, b.Unblock)
	}
	if ready := meta.FindStatusCondition(trig.Status.Conditions, v1alpha1.ConditionReady); ready != nil && ready.Status == metav1.ConditionFalse {
		return fmt.Sprintf("the trigger is not Ready (%s: %s)", ready.Reason, ready.Message)
	}
	return ""
}
