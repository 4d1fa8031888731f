package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/metrics"
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

// syncCreation runs the first step that has not succeeded for the pipeline's generation.
func (c *Controller) syncCreation(ctx context.Context, p *v1alpha1.Pipeline) (time.Duration, error) {
	r := c.newRun(p)
	r.status.ObservedGeneration = p.Generation
	if hash := specHash(&p.Spec); hash != r.status.SpecHash {
		// A new spec: every step runs again (hooks are idempotent). Toggling suspend alone
		// does not change the hash, so a suspended pipeline resumes where it stopped.
		for i := range r.status.Steps {
			r.resetStep(&r.status.Steps[i])
		}
		r.status.SpecHash = hash
		r.status.StartTime = r.timeNow()
		r.status.CompletionTime = nil
	}
	retryRequested := r.applyRetryAnnotation(false)

	// Steps that finish at once run one after the other in this call, so that K instant
	// steps cost one status write rather than K: the API server's write rate is what bounds
	// an operator's throughput. The batch ends at the first step that does not succeed at
	// once (its hook waits, or failed), and no new step starts after maxBatchDuration or
	// once the operator is shutting down, so that slow steps still record their progress.
	var requeue time.Duration
	batchStart := r.now()
	for i := r.currentStep(); i >= 0 && !r.failed() && !p.Spec.Suspend; i = r.currentStep() {
		requeue = r.runStep(ctx, i, createDirection)
		if r.status.Steps[i].Phase != v1alpha1.StepSucceeded ||
			r.now().Sub(batchStart) >= maxBatchDuration || c.queue.ShuttingDown() {
			break
		}
	}
	r.summarize(false)
	return requeue, c.finish(ctx, r, retryRequested)
}

// maxBatchDuration bounds the work one sync does before writing it down: after it, the next
// step starts in the next sync, after a status write.
const maxBatchDuration = time.Second

// syncDeletion tears down the steps that started, last first, as syncCreation runs them:
// in one sync while each teardown finishes at once; with none left it removes the
// finalizer.
func (c *Controller) syncDeletion(ctx context.Context, p *v1alpha1.Pipeline) (time.Duration, error) {
	r := c.newRun(p)
	retryRequested := r.applyRetryAnnotation(true)

	if r.lastStepToTearDown() < 0 {
		return 0, c.removeFinalizer(ctx, p)
	}
	var requeue time.Duration
	batchStart := r.now()
	for i := r.lastStepToTearDown(); i >= 0 && !r.teardownBlocked(i); i = r.lastStepToTearDown() {
		requeue = r.runStep(ctx, i, deleteDirection)
		if r.status.Steps[i].Phase != v1alpha1.StepDeleted ||
			r.now().Sub(batchStart) >= maxBatchDuration || c.queue.ShuttingDown() {
			break
		}
	}
	if r.lastStepToTearDown() < 0 {
		// The last teardown is done: the object goes away, so its status needs no write.
		r.emitEvents()
		return 0, c.removeFinalizer(ctx, p)
	}
	r.summarize(true)
	return requeue, c.finish(ctx, r, retryRequested)
}

// finish writes the run's status and then, once the retry it asked for is recorded,
// removes the retry annotation.
func (c *Controller) finish(ctx context.Context, r *run, retryRequested bool) error {
	if err := c.writeStatus(ctx, r); err != nil {
		return err
	}
	if retryRequested {
		return c.removeRetryAnnotation(ctx, r.p)
	}
	return nil
}

// run is the work of one sync on one pipeline: a working copy of its status and the
// Events to record once that status is written.
type run struct {
	c      *Controller
	p      *v1alpha1.Pipeline // from the cache: never modified
	status *v1alpha1.PipelineStatus
	events []event
	// started indexes, by step name, the StepStarted events of this sync in events: a step
	// that starts and succeeds in the same sync gets only its StepSucceeded event, which
	// keeps Events (writes too) down to one a step for instant steps.
	started map[string]int
}

type event struct {
	warning         bool
	reason, message string
}

func (c *Controller) newRun(p *v1alpha1.Pipeline) *run {
	r := &run{c: c, p: p, status: p.Status.DeepCopy()}
	r.alignSteps()
	return r
}

func (r *run) now() time.Time { return r.c.clock.Now() }

func (r *run) timeNow() *metav1.Time {
	t := metav1.NewTime(r.now())
	return &t
}

func (r *run) event(warning bool, reason, format string, args ...any) {
	r.events = append(r.events, event{warning: warning, reason: reason, message: fmt.Sprintf(format, args...)})
}

func (r *run) emitEvents() {
	for _, e := range r.events {
		if e.reason != "" {
			r.c.eventf(r.p, e.warning, e.reason, "%s", e.message)
		}
	}
	r.events, r.started = nil, nil
}

// alignSteps gives the status one entry for each step of the spec, in spec order, keeping
// what is known of steps that stay. A step removed from the spec is forgotten: without
// its spec, its teardown could not run.
func (r *run) alignSteps() {
	known := make(map[string]v1alpha1.StepStatus, len(r.status.Steps))
	for _, s := range r.status.Steps {
		known[s.Name] = s
	}
	aligned := make([]v1alpha1.StepStatus, len(r.p.Spec.Steps))
	for i, step := range r.p.Spec.Steps {
		s, ok := known[step.Name]
		if !ok {
			s = v1alpha1.StepStatus{Name: step.Name, Phase: v1alpha1.StepPending}
		}
		s.Executor = step.Executor
		aligned[i] = s
	}
	r.status.Steps = aligned
}

// specHash identifies what the steps run with: the spec without suspend.
func specHash(spec *v1alpha1.PipelineSpec) string {
	run := *spec
	run.Suspend = false
	data, err := json.Marshal(&run) // maps marshal with sorted keys: the hash is stable
	if err != nil {
		return "" // cannot happen for these types; an empty hash only re-runs the steps
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	return strconv.FormatUint(h.Sum64(), 16)
}

// resetStep makes a step run again from its first hook. What tells that it started before
// (its start time) stays, so that its teardown still runs if the pipeline is deleted.
func (r *run) resetStep(s *v1alpha1.StepStatus) {
	if s.Phase == v1alpha1.StepPending {
		return
	}
	s.Phase = v1alpha1.StepPending
	s.Hook = ""
	s.Attempts = 0
	s.HookStartTime = nil
	s.NextAttemptTime = nil
	s.CompletionTime = nil
}

// currentStep is the index of the first step that has not succeeded, or -1.
func (r *run) currentStep() int {
	for i := range r.status.Steps {
		if r.status.Steps[i].Phase != v1alpha1.StepSucceeded {
			return i
		}
	}
	return -1
}

// failedStep is the index of a step whose create hooks failed, or -1.
func (r *run) failedStep() int {
	for i := range r.status.Steps {
		s := &r.status.Steps[i]
		if s.Phase == v1alpha1.StepFailed && !isDeleteHook(s.Hook) {
			return i
		}
	}
	return -1
}

func (r *run) failed() bool { return r.failedStep() >= 0 }

// lastStepToTearDown is the index of the last step that started and is not torn down.
func (r *run) lastStepToTearDown() int {
	for i := len(r.status.Steps) - 1; i >= 0; i-- {
		s := &r.status.Steps[i]
		if s.StartTime != nil && s.Phase != v1alpha1.StepDeleted {
			return i
		}
	}
	return -1
}

// teardownBlocked tells whether step i's teardown failed for good and waits for a retry.
func (r *run) teardownBlocked(i int) bool {
	s := &r.status.Steps[i]
	return s.Phase == v1alpha1.StepFailed && isDeleteHook(s.Hook)
}

// applyRetryAnnotation honours a retry asked for with the annotation. It reports whether
// the annotation is present, so that the caller removes it once the status is written.
// A retry of a pipeline that has not failed changes nothing.
func (r *run) applyRetryAnnotation(deleting bool) bool {
	value, ok := r.p.Annotations[v1alpha1.RetryAnnotation]
	if !ok {
		return false
	}
	if deleting {
		for i := range r.status.Steps {
			if r.teardownBlocked(i) {
				s := &r.status.Steps[i]
				s.Phase = v1alpha1.StepDeleting
				s.Hook = "" // start the teardown over
				r.event(false, "RetryRequested", "Retrying the teardown of step %q", s.Name)
			}
		}
		return true
	}
	failed := r.failedStep()
	if failed < 0 {
		return true
	}
	from := failed
	if value != "" && value != "true" {
		named := slices.IndexFunc(r.status.Steps, func(s v1alpha1.StepStatus) bool { return s.Name == value })
		if named < 0 {
			r.event(true, "RetryIgnored", "Retry names step %q, which the pipeline does not have", value)
			return true
		}
		// A retry cannot skip the failed step: start at the named step or the failed one.
		from = min(named, failed)
	}
	for i := from; i < len(r.status.Steps); i++ {
		r.resetStep(&r.status.Steps[i])
	}
	r.status.CompletionTime = nil
	r.event(false, "RetryRequested", "Retrying from step %q", r.status.Steps[from].Name)
	return true
}

// direction is what differs between running a step and tearing it down.
type direction struct {
	hooks       []v1alpha1.Hook
	activePhase v1alpha1.StepPhase
	donePhase   v1alpha1.StepPhase
}

var (
	createDirection = direction{
		hooks:       []v1alpha1.Hook{v1alpha1.HookPreCreate, v1alpha1.HookCreate, v1alpha1.HookPostCreate},
		activePhase: v1alpha1.StepRunning,
		donePhase:   v1alpha1.StepSucceeded,
	}
	deleteDirection = direction{
		hooks:       []v1alpha1.Hook{v1alpha1.HookPreDelete, v1alpha1.HookDelete, v1alpha1.HookPostDelete},
		activePhase: v1alpha1.StepDeleting,
		donePhase:   v1alpha1.StepDeleted,
	}
)

func (d direction) creating() bool { return d.activePhase == v1alpha1.StepRunning }

func (d direction) next(h v1alpha1.Hook) (v1alpha1.Hook, bool) {
	i := slices.Index(d.hooks, h)
	if i < 0 || i == len(d.hooks)-1 {
		return "", false
	}
	return d.hooks[i+1], true
}

func isDeleteHook(h v1alpha1.Hook) bool { return slices.Contains(deleteDirection.hooks, h) }

// inProgress tells whether step s is part-way through the hooks of d.
func (*run) inProgress(s *v1alpha1.StepStatus, d direction) bool {
	return slices.Contains(d.hooks, s.Hook) && (s.Phase == d.activePhase || s.Phase == v1alpha1.StepWaiting)
}

// runStep runs the hooks of step i in direction d, one after the other while they finish
// at once, and stops at the first that is not done or fails. It returns when to look
// again, or 0.
func (r *run) runStep(ctx context.Context, i int, d direction) time.Duration {
	step := &r.p.Spec.Steps[i]
	s := &r.status.Steps[i]
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "step", s.Name, "executor", step.Executor)
	ctx = klog.NewContext(ctx, logger)

	switch {
	case !r.inProgress(s, d):
		r.beginStep(s, d)
	case s.Phase == v1alpha1.StepWaiting:
		if wait := s.NextAttemptTime.Sub(r.now()); wait > 0 {
			return wait
		}
		s.Attempts++
		s.HookStartTime = r.timeNow()
		s.NextAttemptTime = nil
		s.Phase = d.activePhase
		r.setStepCondition(s, metav1.ConditionFalse, string(d.activePhase), s.Message)
	}

	exec, ok := r.c.executors.Get(step.Executor)
	if !ok {
		return r.failStep(s, step, d, executor.Permanent("UnknownExecutor", r.c.executors.Missing(step.Executor)))
	}
	req, err := r.request(i, s)
	if err != nil {
		return r.failStep(s, step, d, err)
	}

	for {
		req.Hook, req.Attempt = s.Hook, s.Attempts
		req.IdempotencyKey = executor.IdempotencyKey(r.p.UID, s.Name, s.Hook)
		deadline := s.HookStartTime.Add(step.EffectiveTimeout())
		if !r.now().Before(deadline) {
			return r.failStep(s, step, d, executor.Retryable(executor.ReasonTimeout,
				fmt.Errorf("%s did not finish within the step's timeout of %s", s.Hook, step.EffectiveTimeout())))
		}

		res, err := r.callHook(ctx, exec, req, deadline)
		if err != nil {
			return r.failStep(s, step, d, fmt.Errorf("%s: %w", s.Hook, err))
		}
		if err := mergeOutputs(s, res.Outputs); err != nil {
			return r.failStep(s, step, d, err)
		}
		// A hook with nothing to say (often a no-op PostCreate) keeps what an earlier hook
		// of the step said, such as "VM destroyed".
		if res.Message != "" {
			s.Message = truncateMessage(res.Message)
		}

		if !res.Done {
			after := res.RequeueAfter
			if after <= 0 {
				after = defaultRequeueAfter
			}
			// Look again no later than the deadline, so a timeout is noticed on time.
			after = min(after, deadline.Sub(r.now()))
			r.setStepCondition(s, metav1.ConditionFalse, string(d.activePhase), s.Message)
			return after
		}

		next, more := d.next(s.Hook)
		if !more {
			r.completeStep(s, step, d)
			return 0
		}
		s.Hook = next
		s.Attempts = 1
		s.HookStartTime = r.timeNow()
	}
}

// beginStep puts step s at the first hook of direction d.
func (r *run) beginStep(s *v1alpha1.StepStatus, d direction) {
	now := r.timeNow()
	s.Phase = d.activePhase
	s.Hook = d.hooks[0]
	s.Attempts = 1
	s.HookStartTime = now
	s.NextAttemptTime = nil
	s.CompletionTime = nil
	s.Message = ""
	if d.creating() {
		s.ObservedGeneration = r.p.Generation
		s.StartTime = now
		s.Outputs = nil // this run's outputs replace the last run's
		if r.started == nil {
			r.started = map[string]int{}
		}
		r.started[s.Name] = len(r.events)
		r.event(false, "StepStarted", "Step %q started (%s)", s.Name, s.Executor)
	} else {
		r.event(false, "TeardownStarted", "Teardown of step %q started", s.Name)
	}
	r.setStepCondition(s, metav1.ConditionFalse, string(d.activePhase), "")
}

// completeStep marks step s done in direction d.
func (r *run) completeStep(s *v1alpha1.StepStatus, step *v1alpha1.Step, d direction) {
	s.Phase = d.donePhase
	s.CompletionTime = r.timeNow()
	s.HookStartTime = nil
	if d.creating() {
		r.setStepCondition(s, metav1.ConditionTrue, "Completed", s.Message)
		if i, ok := r.started[s.Name]; ok {
			r.events[i].reason = "" // dropped by emitEvents
			delete(r.started, s.Name)
		}
		r.event(false, "StepSucceeded", "Step %q succeeded (%s)", s.Name, s.Executor)
		r.c.metrics.ObserveStep(step.Executor, "succeeded", s.CompletionTime.Sub(s.StartTime.Time))
	} else {
		r.setStepCondition(s, metav1.ConditionFalse, string(v1alpha1.StepDeleted), "torn down")
		r.event(false, "StepTornDown", "Teardown of step %q finished", s.Name)
	}
}

// failStep records a failed hook: a retry after backoff while the step's retry limit
// allows and the error is not permanent, otherwise a failed step.
func (r *run) failStep(s *v1alpha1.StepStatus, step *v1alpha1.Step, d direction, err error) time.Duration {
	reason := executor.ReasonFor(err)
	policy := step.EffectiveRetry()
	if !executor.IsPermanent(err) && s.Attempts <= policy.Limit {
		delay := r.c.jitter(policy.Backoff.Delay(s.Attempts))
		s.Phase = v1alpha1.StepWaiting
		next := metav1.NewTime(r.now().Add(delay))
		s.NextAttemptTime = &next
		s.Message = truncateMessage(fmt.Sprintf("attempt %d of %d failed, retrying in %s: %v",
			s.Attempts, policy.Limit+1, delay.Round(time.Millisecond), err))
		r.setStepCondition(s, metav1.ConditionFalse, reason, s.Message)
		r.event(true, "StepRetrying", "Step %q: %s", s.Name, s.Message)
		r.c.metrics.Retry(step.Executor, string(s.Hook))
		return delay
	}

	s.Phase = v1alpha1.StepFailed
	s.NextAttemptTime = nil
	s.CompletionTime = r.timeNow()
	if executor.IsPermanent(err) || policy.Limit == 0 {
		s.Message = truncateMessage(err.Error())
	} else {
		s.Message = truncateMessage(fmt.Sprintf("failed after %d attempts: %v", s.Attempts, err))
	}
	r.setStepCondition(s, metav1.ConditionFalse, reason, s.Message)
	if d.creating() {
		r.event(true, "StepFailed", "Step %q failed: %s", s.Name, s.Message)
		if s.StartTime != nil {
			r.c.metrics.ObserveStep(step.Executor, "failed", s.CompletionTime.Sub(s.StartTime.Time))
		}
	} else {
		r.event(true, "TeardownFailed", "Teardown of step %q failed: %s", s.Name, s.Message)
	}
	return 0
}

// request builds what the hooks of step i are given.
func (r *run) request(i int, s *v1alpha1.StepStatus) (*executor.Request, error) {
	outputs := make(map[string]map[string]string, i+1)
	all := make(map[string]bool, len(r.status.Steps))
	for j := range r.status.Steps {
		all[r.status.Steps[j].Name] = true
		if j <= i && len(r.status.Steps[j].Outputs) > 0 {
			outputs[r.status.Steps[j].Name] = r.status.Steps[j].Outputs
		}
	}
	earlier := make(map[string]map[string]string, i)
	for j := range i {
		earlier[r.status.Steps[j].Name] = r.status.Steps[j].Outputs
	}
	res := &resolver{params: r.p.Spec.Params, earlier: earlier, all: all}
	params, err := res.resolveParams(r.p.Spec.Steps[i].With)
	if err != nil {
		return nil, executor.Permanent("InvalidReference", err)
	}

	sa := r.p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	clients, err := r.c.clients.ForServiceAccount(r.p.Namespace, sa)
	if err != nil {
		return nil, executor.Retryable("ClientError", fmt.Errorf("clients for service account %s/%s: %w", r.p.Namespace, sa, err))
	}
	return &executor.Request{
		Pipeline: executor.PipelineRef{
			Namespace: r.p.Namespace, Name: r.p.Name, UID: r.p.UID, Generation: r.p.Generation,
		},
		ServiceAccountName: sa,
		Step:               s.Name,
		Params:             params,
		Outputs:            outputs,
		Clients:            clients,
	}, nil
}

// callHook runs one hook with the attempt's deadline, turning a panic into an error so
// that one bad executor cannot take the operator down.
func (r *run) callHook(ctx context.Context, exec executor.TaskExecutor, req *executor.Request, deadline time.Time) (res executor.Result, err error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			res, err = executor.Result{}, fmt.Errorf("executor %s panicked: %v", exec.Name(), p)
		}
		result := metrics.HookDone
		switch {
		case err != nil:
			result = metrics.HookError
		case !res.Done:
			result = metrics.HookWait
		}
		r.c.metrics.ObserveHook(exec.Name(), string(req.Hook), result, time.Since(start))
		klog.FromContext(ctx).V(4).Info("Hook called", "hook", req.Hook, "attempt", req.Attempt,
			"result", result, "duration", time.Since(start), "err", err)
	}()
	return executor.RunHook(ctx, exec, req.Hook, req)
}

// writeStatus writes the run's status through the status subresource when it differs from
// what the cache holds, then records the run's Events.
func (c *Controller) writeStatus(ctx context.Context, r *run) error {
	if equality.Semantic.DeepEqual(&r.p.Status, r.status) {
		r.emitEvents()
		return nil
	}
	p := r.p.DeepCopy()
	p.Status = *r.status
	updated, err := c.client.StepwiseV1alpha1().Pipelines(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{FieldManager: ControllerName})
	if err != nil {
		return fmt.Errorf("update status of pipeline %s/%s: %w", p.Namespace, p.Name, err)
	}
	c.wrote(updated)
	r.emitEvents()
	return nil
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
