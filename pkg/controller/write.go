package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/semantic"
)

// writeStatus writes the sync's status through the status subresource when it differs from
// what the cache holds, then records the sync's Events.
func (c *Controller) writeStatus(ctx context.Context, ps *pipelineSync) error {
	if semantic.Equal(&ps.p.Status, ps.status) {
		ps.emitEvents()
		return nil
	}
	p := ps.p.DeepCopy()
	p.Status = *ps.status
	if err := ps.keepUnderMaxSize(ctx, p); err != nil {
		return err
	}
	updated, err := c.updateStatus(ctx, p)
	// Writing nothing would run the same hooks again at every sync, never counting an
	// attempt: when the API server refuses what they produced, record instead that their
	// steps failed, without what was refused.
	if (apierrors.IsInvalid(err) && ps.rejectStatus(err)) || (statusTooLarge(err) && ps.refuseTooLarge()) {
		p.Status = *ps.status
		updated, err = c.updateStatus(ctx, p)
	}
	if err != nil {
		return fmt.Errorf("update status of pipeline %s/%s: %w", p.Namespace, p.Name, err)
	}
	c.wrote(updated)
	ps.emitEvents()
	return nil
}

// updateStatus writes p's status as the engine's field manager.
func (c *Controller) updateStatus(ctx context.Context, p *v1alpha1.Pipeline) (*v1alpha1.Pipeline, error) {
	return c.client.StepwiseV1alpha1().Pipelines(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{FieldManager: ControllerName})
}

// patchFinalizers sets the pipeline's finalizers with a merge patch that carries the
// resourceVersion, so it fails rather than overwrite a change it has not seen.
func (c *Controller) patchFinalizers(ctx context.Context, p *v1alpha1.Pipeline, finalizers []string) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"finalizers": finalizers, "resourceVersion": p.ResourceVersion},
	})
	if err != nil {
		return fmt.Errorf("marshal finalizer patch: %w", err)
	}
	updated, err := c.client.StepwiseV1alpha1().Pipelines(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: ControllerName})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("set finalizers of pipeline %s/%s: %w", p.Namespace, p.Name, err)
	}
	c.wrote(updated)
	return nil
}

// removeFinalizer lets the API server delete the pipeline.
func (c *Controller) removeFinalizer(ctx context.Context, p *v1alpha1.Pipeline) error {
	return c.patchFinalizers(ctx, p, slices.DeleteFunc(slices.Clone(p.Finalizers),
		func(f string) bool { return f == v1alpha1.Finalizer }))
}

// removeRetryAnnotation removes the retry annotation once the retry is recorded.
func (c *Controller) removeRetryAnnotation(ctx context.Context, p *v1alpha1.Pipeline) error {
	patch := []byte(`{"metadata":{"annotations":{"` + v1alpha1.RetryAnnotation + `":null}}}`)
	updated, err := c.client.StepwiseV1alpha1().Pipelines(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: ControllerName})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove annotation %s from pipeline %s/%s: %w", v1alpha1.RetryAnnotation, p.Namespace, p.Name, err)
	}
	c.wrote(updated)
	return nil
}

// wrote keeps the object a write returned, so that the next sync of the pipeline starts
// from it even before the informer has delivered it (see syncHandler).
func (c *Controller) wrote(p *v1alpha1.Pipeline) {
	if p == nil || p.Name == "" {
		return // the write failed, or the pipeline is gone
	}
	_, _ = TrimForCache(p) // as the informer's copies are
	c.pipelines.Mutation(p)
}

// rejectStatus replaces every step this sync changed by its status before the sync, failed
// with reason StatusRejected and a message naming the fields the API server refused (not
// their values: those are what it refused). It returns false when no step changed, so
// that there is nothing to take back.
func (ps *pipelineSync) rejectStatus(err error) bool {
	var fields []string
	var statusErr *apierrors.StatusError
	if errors.As(err, &statusErr) && statusErr.ErrStatus.Details != nil {
		for _, cause := range statusErr.ErrStatus.Details.Causes {
			fields = append(fields, cause.Field)
		}
	}
	failed := ps.failChangedSteps(false, v1alpha1.ReasonStatusRejected, func(hook v1alpha1.Hook) string {
		return fmt.Sprintf("the API server refused the status that hook %s produced (invalid %s); it is not run again: "+
			"fix the executor, then retry (annotate %s)", hook, strings.Join(fields, ", "), v1alpha1.RetryAnnotation)
	})
	return len(failed) > 0
}

// failChangedSteps replaces every step this sync changed by its status before the sync,
// failed in the hook it ran with reason and the message for that hook, and summarises the
// pipeline again. With keepRuns, the retired runs this sync changed fail too, and a run
// record made in this sync stays: teardown needs it, and it was not what was refused. It
// returns the names of the steps it failed.
func (ps *pipelineSync) failChangedSteps(keepRuns bool, reason string, message func(hook v1alpha1.Hook) string) []string {
	var failed []string
	fail := func(s *v1alpha1.StepStatus, before v1alpha1.StepStatus) {
		if s.StartTime == nil || semantic.Equal(&before, s) {
			return // no hook of it ran in this sync
		}
		failed = append(failed, s.Name)
		name, exec, hook, started, ran := s.Name, s.Executor, s.Hook, s.StartTime, s.Ran
		*s = before
		s.Name, s.Executor, s.Hook, s.StartTime = name, exec, hook, started
		if keepRuns {
			s.Ran = ran
		}
		s.Phase = v1alpha1.StepFailed
		s.NextAttemptTime = nil
		s.Message, s.Reason = message(hook), reason
	}
	for i := range ps.status.Steps {
		s := &ps.status.Steps[i]
		var before v1alpha1.StepStatus
		if i < len(ps.p.Status.Steps) && ps.p.Status.Steps[i].Name == s.Name {
			before = *ps.p.Status.Steps[i].DeepCopy()
		}
		fail(s, before)
	}
	if keepRuns {
		for i := range ps.status.RetiredSteps {
			s := &ps.status.RetiredSteps[i]
			fail(s, ps.retiredBefore(s))
		}
	}
	if len(failed) == 0 {
		return nil
	}
	ps.summarize()
	return failed
}

// retiredBefore is retired run s as the status before the sync had it: retired already, or
// still a step, which this sync retired (see retire).
func (ps *pipelineSync) retiredBefore(s *v1alpha1.StepStatus) v1alpha1.StepStatus {
	for _, r := range ps.p.Status.RetiredSteps {
		if r.Name == s.Name && r.StartTime.Equal(s.StartTime) {
			return *r.DeepCopy()
		}
	}
	for _, r := range ps.p.Status.Steps {
		if r.Name == s.Name && r.Ran != nil {
			before := *r.DeepCopy()
			before.Executor = before.Ran.Executor
			return before
		}
	}
	return v1alpha1.StepStatus{}
}
