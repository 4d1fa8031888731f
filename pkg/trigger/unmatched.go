package trigger

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// unmatched handles the pipelines whose object no longer matches: it is gone (deleted, or
// being deleted), or its labels no longer match the selector. Under WhenUnmatched Delete
// each is deleted, and its teardown runs. Under Keep they stay, but of the finished
// pipelines of objects that are gone at most spec.historyLimit are kept: the oldest
// (by completion time, else creation time) go first, deleted, or with archiving on removed
// by retention once archived, without a teardown. The pipeline of an object
// that still exists but no longer matches is not history: it is found again if the
// object matches again.
func (ts *triggerSync) unmatched(ctx context.Context, matched map[types.UID]bool) error {
	var history []*v1alpha1.Pipeline
	for _, p := range ts.pipelines {
		uid := rules.ObjectUIDOf(p)
		if matched[uid] || p.UID == "" || p.DeletionTimestamp != nil || ts.mem.deleted[p.UID] {
			continue
		}
		_, present := ts.present[uid]
		object := p.Annotations[v1alpha1.AnnotationObject]
		if ts.trig.Spec.WhenUnmatched == v1alpha1.UnmatchedDelete {
			why := "is gone"
			if present {
				why = "no longer matches"
			}
			if err := ts.deletePipeline(ctx, p, "%s %s: deleted pipeline %s (its teardown runs)", object, why, p.Name); err != nil {
				return err
			}
			continue
		}
		if !present && p.Finished() {
			history = append(history, p)
		}
	}
	limit := max(int(ts.trig.Spec.HistoryLimit), 0)
	if len(history) <= limit {
		return nil
	}
	slices.SortFunc(history, func(a, b *v1alpha1.Pipeline) int { // oldest first
		if c := finishTime(a).Compare(finishTime(b).Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	for _, p := range history[:len(history)-limit] {
		var err error
		if ts.c.archiving {
			err = ts.retire(ctx, p, "history limit %d: pipeline %s of %s, which is gone, is removed once archived, without a teardown",
				limit, p.Name, p.Annotations[v1alpha1.AnnotationObject])
		} else {
			err = ts.deletePipeline(ctx, p, "history limit %d: deleted pipeline %s of %s, which is gone (its teardown runs)",
				limit, p.Name, p.Annotations[v1alpha1.AnnotationObject])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// retire sets p's retention to nothing, so that the engine removes it as soon as the
// archive has its record, without a teardown (the archive keeps its history), and says
// why in an Event.
func (ts *triggerSync) retire(ctx context.Context, p *v1alpha1.Pipeline, format string, args ...any) error {
	if r := p.Spec.Retention; r != nil && r.AfterFinished.Duration == 0 {
		return nil // asked already
	}
	patch := fmt.Appendf(nil, `{"metadata":{"uid":%q},"spec":{"retention":{"afterFinished":"0s"}}}`, p.UID)
	_, err := ts.c.client.StepwiseV1alpha1().Pipelines(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: ControllerName})
	// The patch's UID makes it fail (a UID is immutable: Invalid) on another pipeline that
	// took the name since.
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
		return nil // gone already, or another pipeline now has the name
	}
	if err != nil {
		return fmt.Errorf("set the retention of pipeline %s/%s: %w", p.Namespace, p.Name, err)
	}
	ts.mem.deleted[p.UID] = true
	ts.event(corev1.EventTypeNormal, v1alpha1.TriggerReasonPipelineDeleted, format, args...)
	return nil
}

// finishTime is when a pipeline finished, or was created if it does not say.
func finishTime(p *v1alpha1.Pipeline) metav1.Time {
	if p.Status.CompletionTime != nil {
		return *p.Status.CompletionTime
	}
	return p.CreationTimestamp
}

// deletePipeline deletes p, if it is still the pipeline we saw, and says why in an Event.
func (ts *triggerSync) deletePipeline(ctx context.Context, p *v1alpha1.Pipeline, format string, args ...any) error {
	err := ts.c.client.StepwiseV1alpha1().Pipelines(p.Namespace).Delete(ctx, p.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone already, or another pipeline now has the name
	}
	if err != nil {
		return fmt.Errorf("delete pipeline %s/%s: %w", p.Namespace, p.Name, err)
	}
	ts.mem.deleted[p.UID] = true
	ts.event(corev1.EventTypeNormal, v1alpha1.TriggerReasonPipelineDeleted, format, args...)
	return nil
}
