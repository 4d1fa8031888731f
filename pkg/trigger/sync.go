package trigger

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

const (
	// invalidResourceRetry is when a trigger on a kind the API server does not serve is
	// looked at again (its CRD may be installed since).
	invalidResourceRetry = 30 * time.Second
	// cacheSyncRetry is when a trigger whose kind's informer has not synced yet is looked
	// at again.
	cacheSyncRetry = time.Second
)

// triggerSync is one reconcile of one trigger: what it found and what it did, from which
// the status is made.
type triggerSync struct {
	c    *Controller
	key  cache.ObjectName
	trig *v1alpha1.PipelineTrigger
	mem  *memory

	// keepStatus: the sync learnt nothing (the kind's informer has not synced).
	keepStatus bool
	// problem makes the trigger Ready=False: it acts on nothing, and its status says
	// nothing of the objects.
	problem *problem
	// templateMissing makes the trigger Ready=False too, but it still counts, and deletes
	// what its policy deletes; it starts nothing.
	templateMissing bool
	// windowClosed: the maintenance window is closed until nextWindow; nothing starts.
	windowClosed bool
	nextWindow   time.Time

	target target
	// objects are the objects that match, in the order of matching (see match).
	objects []*unstructured.Unstructured
	// present are the objects of the kind in the trigger's scope, matching or not.
	present map[types.UID]*unstructured.Unstructured
	// pipelines are the trigger's pipelines; byObject by their object's UID.
	pipelines []*v1alpha1.Pipeline
	byObject  map[types.UID]*v1alpha1.Pipeline
	// waiting are the matching objects without a pipeline once the sync is done, in order.
	waiting []*unstructured.Unstructured
	// held are the holds that held objects back in this sync.
	held map[hold]bool
	// objectErrors are the objects that cannot start: their params do not resolve, or
	// the API server refused their pipeline.
	objectErrors []objectError
	// taintErr is the first failure to taint a waiting node or untaint another.
	taintErr error
	// brakes hold the starts back: a pause, a spent failure budget, the cooldown.
	brakes brakes
	// lister lists the objects of the trigger's kind.
	lister cache.GenericLister
	// nodeBudget is the NodeBudget the trigger names; budgetMissing: it names one that
	// does not exist, and starts nothing.
	nodeBudget    *nodeBudget
	budgetMissing bool
	// gates are the health gates as this sync found them.
	gates gates
}

// objectError is an object that cannot start, and why.
type objectError struct {
	object string
	err    error
	// started: the object has a pipeline, which keeps the params it has.
	started bool
}

// syncHandler brings one trigger closer to what it asks for, and returns when to look at it
// again: when the answer on its rights expires, or sooner when something it waits for
// does not announce itself. It reads from the informers' caches only.
func (c *Controller) syncHandler(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	obj, exists, err := c.triggers.GetByKey(key.String())
	if err != nil {
		return 0, fmt.Errorf("get trigger %s from cache: %w", key, err)
	}
	if !exists {
		c.forget(key) // its pipelines stay: they are records, and may be running
		return 0, nil
	}
	trig, ok := obj.(*v1alpha1.PipelineTrigger)
	if !ok {
		return 0, fmt.Errorf("trigger %s: unexpected %T in the cache", key, obj)
	}
	if c.undecodable != nil && trig.DeletionTimestamp == nil {
		if decodeErr := c.undecodable.Err(trig); decodeErr != nil {
			return c.syncUndecodable(ctx, key, trig, decodeErr)
		}
	}
	if trig.DeletionTimestamp != nil {
		if slices.Contains(trig.Finalizers, v1alpha1.FinalizerTaints) {
			return c.finalizeTaints(ctx, key, trig)
		}
		c.forget(key)
		return 0, nil
	}
	ts := &triggerSync{c: c, key: key, trig: trig, mem: c.memoryOf(key),
		present: map[types.UID]*unstructured.Unstructured{}, byObject: map[types.UID]*v1alpha1.Pipeline{}}
	requeue, err := ts.run(ctx)
	if err != nil {
		return 0, err
	}
	return requeue, c.writeStatus(ctx, ts)
}

// run checks, in order, that the trigger's kind is served and allowed, that its
// ServiceAccount may list and watch it, and that its selector and params parse; then it
// reconciles the trigger's pipelines with the objects that match.
func (ts *triggerSync) run(ctx context.Context) (time.Duration, error) {
	c, trig := ts.c, ts.trig
	t, prob := c.resources.resolve(trig.Spec.Resource)
	if prob != nil {
		c.objects.Unwatch(ts.key)
		ts.problem = prob
		if prob.retry {
			return invalidResourceRetry, nil
		}
		return 0, nil
	}
	ts.target = t

	answer, err := c.access.check(ctx, trig, t)
	if err != nil {
		return 0, err
	}
	requeue := max(answer.Expires.Sub(c.clock.Now()), time.Second)
	if !answer.Allowed {
		c.objects.Unwatch(ts.key)
		ts.problem = &problem{reason: v1alpha1.TriggerReasonForbidden, message: answer.Message}
		return requeue, nil
	}
	matcher, err := rules.ParseMatcher(trig)
	if err != nil {
		c.objects.Unwatch(ts.key)
		ts.problem = &problem{reason: v1alpha1.TriggerReasonInvalidSelector, message: err.Error()}
		return requeue, nil
	}
	params, err := parseParams(trig.Spec.Params)
	if err != nil {
		c.objects.Unwatch(ts.key)
		ts.problem = &problem{reason: v1alpha1.TriggerReasonInvalidParameters, message: err.Error()}
		return requeue, nil
	}

	lister, synced, err := c.objects.Watch(ts.key, t.kind(), slices.Concat(matcher.Paths(), params.paths()))
	if err != nil {
		return 0, err
	}
	if !synced {
		ts.keepStatus = true
		return min(requeue, cacheSyncRetry), nil
	}
	ts.lister = lister
	if err := ts.match(lister, matcher); err != nil {
		return 0, err
	}
	if err := ts.collectPipelines(ctx); err != nil {
		return 0, err
	}
	if _, err := c.templates.PipelineTemplates(trig.Namespace).Get(trig.Spec.TemplateRef.Name); err != nil {
		if !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("get template %s/%s from cache: %w", trig.Namespace, trig.Spec.TemplateRef.Name, err)
		}
		ts.templateMissing = true // the template's informer queues the trigger when it appears
	}
	if err := ts.findNodeBudget(); err != nil {
		return 0, err
	}
	w, err := windowAt(trig.Spec.MaintenanceWindow, c.clock.Now())
	if err != nil {
		c.objects.Unwatch(ts.key)
		ts.problem = &problem{reason: v1alpha1.TriggerReasonInvalidWindow, message: err.Error()}
		return requeue, nil
	}
	if !w.change.IsZero() {
		requeue = min(requeue, max(w.change.Sub(c.clock.Now()), time.Second))
	}
	ts.windowClosed, ts.nextWindow = !w.open, w.change
	ts.applyBrakes(c.clock.Now())
	if err := ts.reconcile(ctx, params); err != nil {
		return 0, err
	}
	if ts.coolingDown() {
		requeue = min(requeue, max(ts.brakes.coolUntil.Sub(c.clock.Now()), time.Second))
	}
	if ts.gates.recheckIn > 0 {
		requeue = min(requeue, ts.gates.recheckIn)
	}
	return requeue, nil
}

// reconcile brings the pipelines in line with the objects: params of changed objects,
// pipelines of objects that went, then new pipelines, in the order of matching, within
// the concurrency budget.
func (ts *triggerSync) reconcile(ctx context.Context, params boundParams) error {
	matched := map[types.UID]bool{}
	var candidates []candidate
	for _, obj := range ts.objects {
		matched[obj.GetUID()] = true
		bound, bindErr := params.bind(obj)
		p, ok := ts.byObject[obj.GetUID()]
		switch {
		case !ok:
			candidates = append(candidates, candidate{obj: obj, params: bound, err: bindErr})
		case bindErr != nil:
			ts.objectErrors = append(ts.objectErrors, objectError{object: ts.objectName(obj), err: bindErr, started: true})
		default:
			if err := ts.objectChanged(ctx, obj, p, bound); err != nil {
				return err
			}
		}
	}
	if err := ts.unmatched(ctx, matched); err != nil {
		return err
	}
	if err := ts.start(ctx, candidates); err != nil {
		return err
	}
	if err := ts.syncTaints(ctx); err != nil {
		return err
	}
	ts.mem.prune(ts)
	return nil
}

// objectName names an object in messages, the queue and AnnotationObject.
func (ts *triggerSync) objectName(obj *unstructured.Unstructured) string {
	return rules.ObjectKey(obj.GetNamespace(), obj.GetName())
}
