package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// retentionOf is how long p stays once its finished state is archived: its own retention,
// else its template's, else the default, which only a pipeline whose steps recorded
// nothing they created takes (removing it orphans nothing). false: it stays.
func retentionOf(p *v1alpha1.Pipeline, defaultRetention time.Duration) (time.Duration, bool) {
	switch {
	case p.Spec.Retention != nil:
		return p.Spec.Retention.AfterFinished.Duration, true
	case p.Status.Template != nil && p.Status.Template.Retention != nil:
		return p.Status.Template.Retention.AfterFinished.Duration, true
	case defaultRetention > 0 && !ownsWhatItMade(&p.Status):
		return defaultRetention, true
	}
	return 0, false
}

// ownsWhatItMade tells whether a step of the pipeline recorded something it created: its
// teardown would remove it, which a removal by retention never runs.
func ownsWhatItMade(st *v1alpha1.PipelineStatus) bool {
	created := func(s v1alpha1.StepStatus) bool { return len(s.Created) > 0 }
	return slices.ContainsFunc(st.Steps, created) || slices.ContainsFunc(st.RetiredSteps, created)
}

// removalDue tells when retention removes p: ok is false when it does not (no retention,
// archiving off, or its finished state not archived yet); wait is how long until then, 0
// or less when it is due.
func (env *syncEnv) removalDue(p *v1alpha1.Pipeline) (wait time.Duration, ok bool) {
	if env.archive == nil || p.DeletionTimestamp != nil || !archivedAsFinished(p) {
		return 0, false
	}
	after, ok := retentionOf(p, env.defaultRetention)
	if !ok {
		return 0, false
	}
	return p.Status.Archived.Time.Add(after).Sub(env.clock.Now()), true
}

// removedByRetention tells whether retention archived p as Removed: its deletion tears
// nothing down.
func removedByRetention(p *v1alpha1.Pipeline) bool {
	return p.Status.Archived != nil && p.Status.Archived.State == v1alpha1.ArchiveRemoved
}

// syncRemove removes a pipeline that retention is due to remove, in an order that a crash
// at any point resumes: the archive's record of the removal first (written once, as every
// record), then the status that says so, which makes the deletion skip the teardown
// (modeRetained), then the deletion itself, which a sync of a pipeline so marked that is
// still there asks again.
func (c *Controller) syncRemove(ctx context.Context, p *v1alpha1.Pipeline) (time.Duration, error) {
	if !removedByRetention(p) {
		ps := c.newPipelineSync(p)
		if err := ps.put(ctx, v1alpha1.ArchiveRemoved, ps.now()); err != nil {
			return 0, err
		}
		ps.status.Archived = &v1alpha1.ArchivedState{Generation: p.Generation, State: v1alpha1.ArchiveRemoved, Time: metav1.NewTime(ps.now())}
		after, _ := retentionOf(p, c.defaultRetention)
		ps.record(retentionRemoved(after))
		if err := c.writeStatus(ctx, ps); err != nil {
			return 0, err
		}
	}
	uid := p.UID
	err := c.client.StepwiseV1alpha1().Pipelines(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("remove pipeline %s/%s by retention: %w", p.Namespace, p.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Removed by retention, its work left in place", "pipeline", klog.KObj(p))
	return 0, nil
}

// syncRetained lets a pipeline that retention deleted go: its record says Removed, and
// nothing is torn down.
func (c *Controller) syncRetained(ctx context.Context, p *v1alpha1.Pipeline) error {
	return c.removeFinalizer(ctx, p)
}
