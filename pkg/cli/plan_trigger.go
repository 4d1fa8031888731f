package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

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

// listedNames bounds the object names a line of plan --trigger lists.
const listedNames = 10

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

// planTrigger plans the first --max objects a trigger would start.
func (po *planOptions) planTrigger(ctx context.Context) error {
	ns, err := po.namespace()
	if err != nil {
		return err
	}
	c, err := po.clients()
	if err != nil {
		return err
	}
	if c.Dynamic == nil || c.Mapper == nil {
		return errors.New("plan --trigger needs a dynamic client and a REST mapper")
	}
	q, err := readTriggerQueue(ctx, c, ns, po.trigger)
	if err != nil {
		return err
	}
	startable := q.startable()
	planned := startable[:min(po.max, len(startable))]
	pipelines := make([]*v1alpha1.Pipeline, len(planned))
	for i, w := range planned {
		// The spec of the pipeline the trigger would make, and none of its names: the
		// trigger would count a dry run with its labels as its own.
		spec := rules.PipelineFor(q.trig, w.obj, w.params).Spec
		pipelines[i] = dryRunOf(&v1alpha1.Pipeline{Spec: spec}, q.trig.Name)
	}
	pl := &planner{cs: c.Stepwise, ns: ns, keep: po.keep}
	defer po.cleanup(ctx, pl)
	var results []*v1alpha1.Pipeline
	if len(pipelines) > 0 {
		if results, err = pl.plan(ctx, pipelines, po.timeout); err != nil {
			return err
		}
	}
	if po.output != "" {
		err = po.encode(triggerReportOf(q, planned, results, po.keep))
	} else {
		err = po.printTriggerPlan(q, planned, results)
	}
	if err != nil {
		return err
	}
	if slices.ContainsFunc(results, (*v1alpha1.Pipeline).Failed) {
		return errPipelineFailed
	}
	return nil
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
		// leaves it. An old version's that the trigger would adopt is.
		if p := &list.Items[i]; rules.OwnershipOf(trig, p) != rules.NotOwned {
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

// blockedBecause says why the trigger starts nothing now, from its spec and from what its
// status says: suspended, outside its maintenance window, or not Ready.
func blockedBecause(trig *v1alpha1.PipelineTrigger) string {
	switch ready := meta.FindStatusCondition(trig.Status.Conditions, v1alpha1.ConditionReady); {
	case trig.Spec.Suspend:
		return "the trigger is suspended"
	case trig.Status.NextWindow != nil:
		return "the maintenance window opens at " + trig.Status.NextWindow.UTC().Format(time.RFC3339)
	case ready != nil && ready.Status == metav1.ConditionFalse:
		return fmt.Sprintf("the trigger is not Ready (%s: %s)", ready.Reason, ready.Message)
	}
	return ""
}

// printTriggerPlan writes what the trigger would start, then each planned object's plan.
func (po *planOptions) printTriggerPlan(q *triggerQueue, planned []waitingObject, results []*v1alpha1.Pipeline) error {
	var b strings.Builder
	trig := q.trig
	_, _ = fmt.Fprintf(&b, "Trigger %s/%s: %s %s objects, template %s, concurrency %d, %s unfinished\n",
		oneLine(trig.Namespace, 0), oneLine(trig.Name, 0), oneLine(trig.Spec.Resource.APIVersion, 0), oneLine(trig.Spec.Resource.Kind, 0),
		oneLine(trig.Spec.TemplateRef.Name, 0), q.concurrency(), plural(q.unfinished, "pipeline"))
	if len(q.started) > 0 {
		b.WriteString("Started already: " + nameList(q.started) + "\n")
	}
	startable := q.startable()
	free := min(q.free(), len(startable))
	switch {
	case len(startable) == 0:
		b.WriteString("Waiting: none\n")
	case q.blocked != "":
		_, _ = fmt.Fprintf(&b, "Waiting: %s; none would start now: %s\n", plural(len(startable), "object"), oneLine(q.blocked, 0))
	default:
		_, _ = fmt.Fprintf(&b, "Waiting: %s, in the order they would start; %d would start now\n", plural(len(startable), "object"), free)
	}
	if _, err := fmt.Fprint(po.streams.Out, b.String()); err != nil {
		return fmt.Errorf("write the plan: %w", err)
	}
	for i, w := range planned {
		when := "would start now"
		if i >= free {
			when = "would wait"
		}
		if _, err := fmt.Fprintln(po.streams.Out); err != nil {
			return fmt.Errorf("write the plan: %w", err)
		}
		title := fmt.Sprintf("%d. %s (%s)", i+1, w.name, when)
		if err := printPlan(po.streams.Out, title, []string{"Params: " + paramList(w.params)}, results[i]); err != nil {
			return err
		}
	}
	b.Reset()
	if more := startable[len(planned):]; len(more) > 0 {
		names := make([]string, len(more))
		for i, w := range more {
			names[i] = w.name
		}
		_, _ = fmt.Fprintf(&b, "\n%d more would wait, not planned (--max %d): %s\n", len(more), po.max, nameList(names))
	}
	for _, w := range q.waiting {
		if w.err != nil {
			_, _ = fmt.Fprintf(&b, "! %s waits, its params do not resolve: %s\n", oneLine(w.name, 0), oneLine(w.err.Error(), 0))
		}
	}
	if _, err := fmt.Fprint(po.streams.Out, b.String()); err != nil {
		return fmt.Errorf("write the plan: %w", err)
	}
	return nil
}

// nameList lists the first names, through oneLine, and says how many more there are.
func nameList(names []string) string {
	out := make([]string, 0, min(len(names), listedNames))
	for _, n := range names[:min(len(names), listedNames)] {
		out = append(out, oneLine(n, 0))
	}
	s := strings.Join(out, ", ")
	if len(names) > listedNames {
		s += fmt.Sprintf(" and %d more", len(names)-listedNames)
	}
	return s
}

// paramList is NAME=VALUE, ..., by name, every value through oneLine.
func paramList(params map[string]string) string {
	if len(params) == 0 {
		return "none"
	}
	out := make([]string, 0, len(params))
	for _, k := range slices.Sorted(maps.Keys(params)) {
		out = append(out, oneLine(k, 0)+"="+oneLine(params[k], 0))
	}
	return strings.Join(out, ", ")
}

// triggerReport is plan --trigger's -o json and -o yaml.
type triggerReport struct {
	Trigger     string `json:"trigger"`
	Template    string `json:"template"`
	Concurrency int    `json:"concurrency"`
	// Unfinished counts the trigger's pipelines that hold a place; StartNow how many of the
	// waiting objects would start now; Blocked says why none would.
	Unfinished int    `json:"unfinished"`
	StartNow   int    `json:"startNow"`
	Blocked    string `json:"blocked,omitempty"`
	// Started are the matching objects that have a pipeline already.
	Started []string `json:"started,omitempty"`
	// Objects are the planned objects, in the order they would start; NotPlanned the other
	// waiting ones, beyond --max.
	Objects    []objectReport `json:"objects"`
	NotPlanned []string       `json:"notPlanned,omitempty"`
	// Unresolved are the objects whose params do not resolve: they wait without a place.
	Unresolved []unresolvedObject `json:"unresolved,omitempty"`
}

// objectReport is one planned object.
type objectReport struct {
	Object    string            `json:"object"`
	StartsNow bool              `json:"startsNow"`
	Params    map[string]string `json:"params,omitempty"`
	Plan      planReport        `json:"plan"`
}

// unresolvedObject is an object whose params do not resolve, and why.
type unresolvedObject struct {
	Object string `json:"object"`
	Error  string `json:"error"`
}

func triggerReportOf(q *triggerQueue, planned []waitingObject, results []*v1alpha1.Pipeline, kept bool) triggerReport {
	startable := q.startable()
	free := min(q.free(), len(startable))
	r := triggerReport{
		Trigger: q.trig.Namespace + "/" + q.trig.Name, Template: q.trig.Spec.TemplateRef.Name,
		Concurrency: q.concurrency(), Unfinished: q.unfinished, StartNow: free, Blocked: q.blocked,
		Started: q.started, Objects: []objectReport{},
	}
	for i, w := range planned {
		r.Objects = append(r.Objects, objectReport{Object: w.name, StartsNow: i < free, Params: w.params, Plan: reportOf(results[i], kept)})
	}
	for _, w := range startable[len(planned):] {
		r.NotPlanned = append(r.NotPlanned, w.name)
	}
	for _, w := range q.waiting {
		if w.err != nil {
			r.Unresolved = append(r.Unresolved, unresolvedObject{Object: w.name, Error: w.err.Error()})
		}
	}
	return r
}
