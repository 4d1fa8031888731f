package trigger

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// candidate is a matching object without a pipeline, and its params.
type candidate struct {
	obj    *unstructured.Unstructured
	params map[string]string
	err    error
}

// start creates pipelines for the candidates, in the order of matching, while nothing holds
// them back (holdFor: the trigger's own hold, its concurrency, its health gates, its
// NodeBudget). A candidate whose params do not resolve, or whose pipeline the API server
// refuses, waits without taking a place. The others wait: an object that cannot start is
// reported once; each hold that holds objects back is reported once while it holds.
func (ts *triggerSync) start(ctx context.Context, candidates []candidate) error {
	defer ts.releaseBudget()
	unfinished := rules.Unfinished(ts.pipelines)
	for _, cand := range candidates {
		name := ts.objectName(cand.obj)
		if cand.err != nil {
			ts.objectErrors = append(ts.objectErrors, objectError{object: name, err: cand.err})
			ts.reportWaiting(cand.obj, corev1.EventTypeWarning, "%s waits: %v", name, cand.err)
			ts.waiting = append(ts.waiting, cand.obj)
			continue
		}
		switch h := ts.holdFor(ctx, cand.obj, unfinished); h {
		case holdNone:
			err := ts.create(ctx, cand)
			if err == nil {
				unfinished++
				ts.tookBudget(cand.obj)
				ts.started(ts.c.clock.Now())
				continue
			}
			var taken *nameTakenError
			if !refusedObject(err) && !errors.As(err, &taken) {
				return err
			}
			// One object's refusal is its own: it waits, in the status and a Warning
			// (bounded: an admission webhook writes what it likes), without a place in
			// the budget. It is tried again at a later sync that has a place for it: at
			// the latest when the trigger's access answer expires, which every sync
			// asks to be requeued for. The status write queues no sync, so a refusal
			// makes no loop. A name held by a pipeline not the trigger's waits the same way.
			ts.objectErrors = append(ts.objectErrors, objectError{object: name, err: err})
			ts.reportWaiting(cand.obj, corev1.EventTypeWarning, "%s waits: %s", name, truncate(err.Error(), maxMessage))
		default:
			ts.reportHeld(h, unfinished, name)
		}
		ts.waiting = append(ts.waiting, cand.obj)
	}
	return nil
}

// nameTakenError: the name of an object's pipeline is held by a pipeline that is not the
// trigger's (rules.OwnershipOf). The object waits: taking that pipeline over, or deleting
// it, could act on what another trigger, or a person, started.
type nameTakenError struct{ name string }

func (e *nameTakenError) Error() string {
	return fmt.Sprintf("pipeline %s exists and is not this trigger's (an earlier trigger of the same name made it, someone other than the operator did, or it is a copy): "+
		"delete it for the trigger to run one", e.name)
}

// create creates the pipeline of an object (rules.PipelineFor), unless the cache shows a
// pipeline that is not the trigger's under its name. One that exists already that the
// cache has not seen (made by an earlier sync whose write the cache has not seen) takes
// its place in the budget all the same.
func (ts *triggerSync) create(ctx context.Context, cand candidate) error {
	p := rules.PipelineFor(ts.trig, cand.obj, cand.params)
	existing, exists, err := ts.c.pipelines.GetByKey(p.Namespace + "/" + p.Name)
	if err != nil {
		return fmt.Errorf("get pipeline %s/%s from cache: %w", p.Namespace, p.Name, err)
	}
	if other, ok := existing.(*v1alpha1.Pipeline); exists && ok && rules.OwnershipOf(ts.trig, other, ts.c.operator) == rules.NotOwned {
		return &nameTakenError{name: p.Name}
	}
	created, err := ts.c.client.StepwiseV1alpha1().Pipelines(p.Namespace).Create(ctx, p, metav1.CreateOptions{FieldManager: ControllerName})
	if apierrors.IsAlreadyExists(err) {
		ts.pipelines = append(ts.pipelines, p)
		ts.byObject[cand.obj.GetUID()] = p
		return nil
	}
	if err != nil {
		return fmt.Errorf("create pipeline %s/%s for %s: %w", p.Namespace, p.Name, ts.objectName(cand.obj), err)
	}
	ts.c.pipelines.Mutation(created)
	ts.pipelines = append(ts.pipelines, created)
	ts.byObject[cand.obj.GetUID()] = created
	// No Event: the pipeline and the status' counts say it, and an Event per pipeline
	// doubled the API writes of a trigger's run (make bench).
	klog.FromContext(ctx).V(2).Info("Created a pipeline", "trigger", klog.KObj(ts.trig), "pipeline", klog.KObj(created), "object", ts.objectName(cand.obj))
	return nil
}

// refusedObject tells whether the API server refused this pipeline (admission, validation,
// its size: an Invalid, Forbidden, BadRequest or other 4xx answer), which retrying the
// sync at once does not mend, rather than failed to handle the request: a 5xx answer, 429,
// a timeout, 401 (the operator's own credentials), a connection or context error. Those
// are about the server and would fail every object alike, so they fail the sync, which is
// retried with backoff and can succeed once the server recovers. Any other 4xx counts as
// a refusal: recorded against one object when it was the server's, it misleads a little;
// failing the sync for it would stop every other object for ever.
func refusedObject(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	switch {
	case apierrors.IsTooManyRequests(err), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err),
		apierrors.IsUnauthorized(err):
		return false
	}
	code := status.Status().Code
	return code >= http.StatusBadRequest && code < http.StatusInternalServerError && code != http.StatusRequestTimeout
}
