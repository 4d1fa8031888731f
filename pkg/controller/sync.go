package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// syncHandler brings one Pipeline closer to what it asks for. It returns how long to wait
// before looking again when something is in progress.
//
// Each call runs hooks in order while they finish at once, and writes the status once at
// the end: before any waiting, so that a restarted operator resumes where the status says.
// A crash between a hook and that write runs the hook again, which the executor contract
// allows (hooks run at least once). Our own status write brings the next call through the
// informer; the call reads the newer of the informer's copy and what our last write
// returned, so that it never redoes work from a cache that has not caught up yet.
func (c *Controller) syncHandler(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	obj, exists, err := c.pipelines.GetByKey(key.String())
	if err != nil {
		return 0, fmt.Errorf("get pipeline %s from cache: %w", key, err)
	}
	if !exists {
		return 0, nil // Deleted: the finalizer already saw to the teardown.
	}
	p, ok := obj.(*v1alpha1.Pipeline)
	if !ok {
		return 0, fmt.Errorf("pipeline %s: unexpected %T in the cache", key, obj)
	}
	if c.undecodable != nil {
		if decodeErr := c.undecodable.Err(p); decodeErr != nil {
			return c.syncUndecodable(ctx, p, decodeErr)
		}
	}

	if p.Spec.DryRun {
		return c.syncPlan(ctx, p)
	}
	if p.DeletionTimestamp != nil {
		if !slices.Contains(p.Finalizers, v1alpha1.Finalizer) {
			return 0, nil
		}
		return c.syncDeletion(ctx, p)
	}
	if !slices.Contains(p.Finalizers, v1alpha1.Finalizer) {
		// Nothing runs before the finalizer is in place, so no step can escape teardown.
		return 0, c.patchFinalizers(ctx, p, append(slices.Clone(p.Finalizers), v1alpha1.Finalizer))
	}
	return c.syncCreation(ctx, p)
}

// syncCreation tears down what the spec no longer has, then runs the first step that has
// not succeeded for the pipeline's generation.
func (c *Controller) syncCreation(ctx context.Context, p *v1alpha1.Pipeline) (time.Duration, error) {
	ps := c.newPipelineSync(p)
	ps.status.ObservedGeneration = p.Generation
	hash := specHash(&p.Spec)
	newRun := hash != ps.status.SpecHash
	if newRun && ps.refusesEdit() {
		ps.summarize()
		ps.refuseSpecChange(hash)
		return 0, c.finish(ctx, ps, false)
	}
	ps.status.RefusedSpecHash = "" // the spec runs (or an edit was undone)
	if p.Spec.TemplateRef != nil && !ps.takeTemplate(newRun) {
		return 0, c.finish(ctx, ps, false)
	}
	if newRun {
		ps.newSpec(hash)
	}
	retryRequested := ps.retryCreation()

	// Hooks that finish at once run one after the other in this call, so that K instant
	// steps cost one status write rather than K: the API server's write rate is what bounds
	// an operator's throughput. The batch ends at the first step that does not finish at
	// once (its hook waits, or failed), and no new step starts after maxBatchDuration or
	// once the operator is shutting down, so that slow steps still record their progress.
	var requeue time.Duration
	batchStart := ps.now()
	stopped := p.Spec.Suspend
	if !stopped {
		requeue, stopped = ps.tearDown(ctx, true, batchStart)
	}
	ps.dropTornDownRetired()
	if len(ps.status.RetiredSteps) == 0 && ps.failureTeardown() == "" {
		for i := ps.currentStep(); i >= 0 && !stopped && !ps.failed(); i = ps.currentStep() {
			requeue = ps.runStep(ctx, ps.specStep(i), createDirection)
			stopped = !ps.goOn(&ps.status.Steps[i], v1alpha1.StepSucceeded, batchStart)
		}
	}
	if !p.Spec.Suspend {
		if after := ps.tearDownAfterFailure(ctx); after > 0 {
			requeue = after
		}
	}
	ps.summarize()
	return requeue, c.finish(ctx, ps, retryRequested)
}

// maxBatchDuration bounds the work one sync does before writing it down: after it, the next
// step starts in the next sync, after a status write.
const maxBatchDuration = time.Second

// syncDeletion tears down the steps that ran, last first, then the retired runs, as
// syncCreation runs them: in one sync while each teardown finishes at once; with none left
// it removes the finalizer.
func (c *Controller) syncDeletion(ctx context.Context, p *v1alpha1.Pipeline) (time.Duration, error) {
	ps := c.newPipelineSync(p)
	retryRequested := ps.retryTeardown()
	if ps.orphaned(ctx) {
		ps.emitEvents()
		return 0, c.removeFinalizer(ctx, p)
	}

	requeue, _ := ps.tearDown(ctx, false, ps.now())
	if _, ok := ps.nextTeardown(false); !ok {
		// The last teardown is done: the object goes away, so its status needs no write.
		ps.emitEvents()
		return 0, c.removeFinalizer(ctx, p)
	}
	ps.summarizeTeardown()
	return requeue, c.finish(ctx, ps, retryRequested)
}

// tearDown runs the teardowns nextTeardown names, one after the other while they finish at
// once, as the steps run (see syncCreation), and reports when to look again and whether it
// stopped before the work was done.
func (ps *pipelineSync) tearDown(ctx context.Context, retiredOnly bool, batchStart time.Time) (time.Duration, bool) {
	var requeue time.Duration
	for r, ok := ps.nextTeardown(retiredOnly); ok; r, ok = ps.nextTeardown(retiredOnly) {
		if teardownBlocked(r.s) {
			return requeue, true
		}
		requeue = ps.runStep(ctx, r, deleteDirection)
		if !ps.goOn(r.s, v1alpha1.StepDeleted, batchStart) {
			return requeue, true
		}
	}
	return requeue, false
}

// goOn tells whether the batch that started at batchStart goes on after step s: s is
// done, there is time left, and the operator is not shutting down.
func (ps *pipelineSync) goOn(s *v1alpha1.StepStatus, done v1alpha1.StepPhase, batchStart time.Time) bool {
	return s.Phase == done && ps.now().Sub(batchStart) < maxBatchDuration && !ps.c.queue.ShuttingDown()
}

// finish writes the sync's status and then, once the retry it asked for is recorded,
// removes the retry annotation.
func (c *Controller) finish(ctx context.Context, ps *pipelineSync, retryRequested bool) error {
	if err := c.writeStatus(ctx, ps); err != nil {
		return err
	}
	if retryRequested {
		return c.removeRetryAnnotation(ctx, ps.p)
	}
	return nil
}
