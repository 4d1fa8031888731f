package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	p, err := c.cachedPipeline(key)
	if err != nil || p == nil {
		return 0, err // nil: deleted, the finalizer already saw to the teardown
	}
	if c.undecodable != nil {
		if decodeErr := c.undecodable.Err(p); decodeErr != nil {
			return c.syncUndecodable(ctx, p, decodeErr)
		}
	}
	if restsAsMetadata(p) {
		return 0, nil
	}
	if p.Elided != nil && restsWithoutValues(p) && (c.archive == nil || archivedAsFinished(p)) {
		if wait, ok := c.removalDue(p); !ok || wait > 0 {
			return max(wait, 0), nil // at rest until retention removes it, if it does
		}
	}
	if p, err = c.whole(ctx, p); err != nil || p == nil {
		return 0, err
	}

	mode := modeOf(p)
	if mode == modeAddFinalizer {
		if err := c.patchFinalizers(ctx, p, append(slices.Clone(p.Finalizers), v1alpha1.Finalizer)); err != nil {
			return 0, err
		}
		// Go on from what the patch returned (the mutation cache has it): the steps start
		// in this sync, not in the one the patch's event queues, which then finds nothing
		// to do: one reconcile and one informer round trip fewer per pipeline.
		if p, err = c.cachedPipeline(key); err != nil || p == nil {
			return 0, err
		}
		if p, err = c.whole(ctx, p); err != nil || p == nil {
			return 0, err
		}
		if mode = modeOf(p); mode == modeAddFinalizer {
			return 0, nil // the patch found the pipeline gone; its event, if any, comes
		}
	}
	switch mode {
	case modePlan:
		return c.syncPlan(ctx, p)
	case modeForget:
		return 0, nil
	case modeOrphan:
		return 0, c.syncOrphan(ctx, p)
	case modeDelete:
		return c.syncDeletion(ctx, p)
	case modeRetained:
		return 0, c.syncRetained(ctx, p)
	case modeRemove:
		return c.syncRemove(ctx, p)
	default:
		if wait, ok := c.removalDue(p); ok && wait <= 0 && mode == modeFinished {
			return c.syncRemove(ctx, p)
		}
		requeue, err := c.syncRun(ctx, p, mode)
		return c.untilRemoval(key, requeue), err
	}
}

// untilRemoval is when to look at the pipeline key again after a sync that asked for
// requeue: no later than when retention is due to remove it, as the status the sync wrote
// says.
func (c *Controller) untilRemoval(key cache.ObjectName, requeue time.Duration) time.Duration {
	p, err := c.cachedPipeline(key)
	if err != nil || p == nil {
		return requeue
	}
	wait, ok := c.removalDue(p)
	if !ok {
		return requeue
	}
	wait = max(wait, time.Second) // due: the next sync removes it
	if requeue > 0 {
		return min(requeue, wait)
	}
	return wait
}

// cachedPipeline reads a pipeline from the cache: the newer of the informer's copy and
// what our last write returned; nil when there is none.
func (c *Controller) cachedPipeline(key cache.ObjectName) (*v1alpha1.Pipeline, error) {
	obj, exists, err := c.pipelines.GetByKey(key.String())
	if err != nil {
		return nil, fmt.Errorf("get pipeline %s from cache: %w", key, err)
	}
	if !exists {
		return nil, nil
	}
	p, ok := obj.(*v1alpha1.Pipeline)
	if !ok {
		return nil, fmt.Errorf("pipeline %s: unexpected %T in the cache", key, obj)
	}
	return p, nil
}

// restsWithoutValues tells whether a pipeline whose cached copy left its values out
// (elideValues) has nothing to do, as its sync would find, so that a resync of a finished
// pipeline costs no fetch: its steps are done or failed for good, its spec is the one they
// ran for, its status has seen its generation, and no retry is asked for.
func restsWithoutValues(p *v1alpha1.Pipeline) bool {
	return modeOf(p) == modeFinished && p.Status.ObservedGeneration == p.Generation && !p.RetryRequested()
}

// whole is p with its values: p itself, or, when the cache left them out (elideValues) or
// holds only its metadata (restsAsMetadata), the pipeline as the API server has it now (nil when it is gone). A read from the API
// server is never older than the cache, so the sync never redoes work the status records.
func (c *Controller) whole(ctx context.Context, p *v1alpha1.Pipeline) (*v1alpha1.Pipeline, error) {
	if p.Elided == nil && !p.MetadataOnly {
		return p, nil
	}
	whole, err := c.client.StepwiseV1alpha1().Pipelines(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get pipeline %s/%s, whose values the cache leaves out: %w", p.Namespace, p.Name, err)
	}
	whole.ManagedFields = nil
	return whole, nil
}

// syncRun is the sync of a pipeline that is not deleted. A refused edit runs nothing; a
// new spec starts a run (startRun), which may wait for its template. Then the handler of
// each mode, derived again from the working status after each, runs while the work
// finishes at once: the retired runs' teardowns, the steps, and the teardown after a
// failure, in one sync and one status write.
func (c *Controller) syncRun(ctx context.Context, p *v1alpha1.Pipeline, mode syncMode) (time.Duration, error) {
	ps := c.newPipelineSync(p)
	ps.status.ObservedGeneration = p.Generation
	hash := specHash(&p.Spec)
	if mode == modeRefuseEdit {
		ps.refuseEdit(hash)
		return 0, c.finish(ctx, ps)
	}
	ps.status.RefusedSpecHash = "" // the spec runs (or an edit was undone)
	ps.ranSpec = hash
	if p.Spec.TemplateRef != nil && !ps.takeTemplate(mode == modeStartRun) {
		return 0, c.finish(ctx, ps)
	}
	if mode == modeStartRun {
		ps.startRun(hash)
	}
	ps.retryRequested = ps.retryCreation()

	// Hooks that finish at once run one after the other in this call, so that K instant
	// steps cost one status write rather than K: the API server's write rate is what bounds
	// an operator's throughput. The batch ends at the first step that does not finish at
	// once (its hook waits, or failed), and no new step starts after maxBatchDuration or
	// once the operator is shutting down, so that slow steps still record their progress.
	var requeue time.Duration
	batchStart := ps.now()
	for goOn := true; goOn; {
		ps.dropTornDownRetired()
		switch runModeOf(&p.Spec, ps.status, hash) {
		case modeTearDownRetired:
			requeue, goOn = ps.tearDownRetired(ctx, batchStart)
		case modeRun:
			requeue, goOn = ps.runSteps(ctx, batchStart)
		case modeTearDownAfterFailure:
			requeue, goOn = ps.tearDownAfterFailure(ctx), false
		default: // suspended or finished: nothing runs
			goOn = false
		}
	}
	return requeue, c.finish(ctx, ps)
}

// tearDownRetired tears down the runs the spec no longer has, and reports when to look
// again and whether the steps may run now in this sync.
func (ps *pipelineSync) tearDownRetired(ctx context.Context, batchStart time.Time) (time.Duration, bool) {
	requeue, stopped := ps.tearDown(ctx, true, batchStart)
	return requeue, !stopped
}

// runSteps runs the steps in order while each finishes at once, and reports when to look
// again and whether a step failed, whose teardown (under onFailure Teardown) starts in
// this sync.
func (ps *pipelineSync) runSteps(ctx context.Context, batchStart time.Time) (time.Duration, bool) {
	var requeue time.Duration
	for i := ps.currentStep(); i >= 0 && !ps.failed(); i = ps.currentStep() {
		requeue = ps.runStep(ctx, ps.specStep(i), createDirection)
		if !ps.goOn(&ps.status.Steps[i], v1alpha1.StepSucceeded, batchStart) {
			break
		}
	}
	return requeue, ps.failed()
}

// maxBatchDuration bounds the work one sync does before writing it down: after it, the next
// step starts in the next sync, after a status write.
const maxBatchDuration = time.Second

// syncDeletion tears down the steps that ran, last first, then the retired runs, as
// syncRun runs them: in one sync while each teardown finishes at once; with none left
// it removes the finalizer.
func (c *Controller) syncDeletion(ctx context.Context, p *v1alpha1.Pipeline) (time.Duration, error) {
	ps := c.newPipelineSync(p)
	ps.retryRequested = ps.retryTeardown()
	requeue, _ := ps.tearDown(ctx, false, ps.now())
	if _, ok := ps.nextTeardown(false); !ok {
		// The last teardown is done: the object goes away, so its status needs no write,
		// once the archive has its record.
		if err := ps.archiveGone(ctx, v1alpha1.ArchiveDeleted); err != nil {
			ps.archiveErr = err // the status says what it waits for
			return 0, errors.Join(c.finish(ctx, ps), err)
		}
		ps.emitEvents()
		return 0, c.removeFinalizer(ctx, p)
	}
	return requeue, c.finish(ctx, ps)
}

// tearDown runs the teardowns nextTeardown names, one after the other while they finish at
// once, as the steps run (see syncRun), and reports when to look again and whether it
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
	return s.Phase == done && ps.now().Sub(batchStart) < maxBatchDuration && !ps.env.shuttingDown()
}

// finish ends every sync that ran a handler: it derives the status' summary from what the
// handler did (summarize), archives a pipeline the sync left finished (archiveFinished),
// writes the status and records the Events, and then, once the retry the sync took is
// recorded, removes the retry annotation. A failed archive write is returned after the
// status is written, so that the run's progress is kept and the record is tried again.
func (c *Controller) finish(ctx context.Context, ps *pipelineSync) error {
	ps.summarize()
	archiveErr := ps.archiveFinished(ctx)
	ps.status.Resting = ps.restingPhase()
	if err := c.writeStatus(ctx, ps); err != nil {
		return errors.Join(err, archiveErr)
	}
	if ps.retryRequested {
		if err := c.removeRetryAnnotation(ctx, ps.p); err != nil {
			return errors.Join(err, archiveErr)
		}
	}
	return archiveErr
}
