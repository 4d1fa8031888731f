package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// direction is what differs between running a step and tearing it down.
type direction struct {
	hooks       []v1alpha1.Hook
	activePhase v1alpha1.StepPhase
	donePhase   v1alpha1.StepPhase
}

var (
	createDirection = direction{
		hooks:       statusHooks(contract.CreationHooks()),
		activePhase: v1alpha1.StepRunning,
		donePhase:   v1alpha1.StepSucceeded,
	}
	deleteDirection = direction{
		hooks:       statusHooks(contract.TeardownHooks()),
		activePhase: v1alpha1.StepDeleting,
		donePhase:   v1alpha1.StepDeleted,
	}
)

// statusHooks are the contract's hooks, in their order, as the status names them.
func statusHooks(hooks []contract.Hook) []v1alpha1.Hook {
	out := make([]v1alpha1.Hook, len(hooks))
	for i, h := range hooks {
		out[i] = v1alpha1.Hook(h)
	}
	return out
}

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
func (*pipelineSync) inProgress(s *v1alpha1.StepStatus, d direction) bool {
	return slices.Contains(d.hooks, s.Hook) && (s.Phase == d.activePhase || s.Phase == v1alpha1.StepWaiting)
}

// stepRef is a step a sync works on: its status entry, the spec it runs with, and its
// index in the spec. A retired step (no longer in the spec) has index -1 and a spec made
// from its run record, which only its teardown uses.
type stepRef struct {
	s     *v1alpha1.StepStatus
	step  *v1alpha1.Step
	index int
}

func (ps *pipelineSync) specStep(i int) stepRef {
	return stepRef{s: &ps.status.Steps[i], step: &ps.steps[i], index: i}
}

func (ps *pipelineSync) retiredStep(j int) stepRef {
	s := &ps.status.RetiredSteps[j]
	return stepRef{s: s, step: &v1alpha1.Step{Name: s.Name, Executor: s.Ran.Executor}, index: -1}
}

// executorName is who runs r's hooks in direction d: a teardown runs the executor that
// Create ran, whatever the spec says now.
func (r stepRef) executorName(d direction) string {
	if !d.creating() && r.s.Ran != nil {
		return r.s.Ran.Executor
	}
	return r.step.Executor
}

// runStep runs the hooks of step r in direction d, one after the other while they finish
// at once, and stops at the first that is not done or fails. It returns when to look
// again, or 0.
func (ps *pipelineSync) runStep(ctx context.Context, r stepRef, d direction) time.Duration {
	s, step := r.s, r.step
	name := r.executorName(d)
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "step", s.Name, "executor", name)
	ctx = klog.NewContext(ctx, logger)

	if d.creating() && step.Approval != nil && !ps.inProgress(s, d) {
		if wait, approved := ps.awaitApproval(ctx, r); !approved {
			return wait
		}
	}
	exec, served := ps.env.executors.Get(name)
	if !served {
		if refusal, refused := ps.env.executors.RefusalFor(name); refused {
			return ps.waitOnRefusedPlugin(s, name, refusal)
		}
	}
	switch {
	case !ps.inProgress(s, d):
		ps.beginStep(s, d)
	case s.Phase == d.activePhase:
		// A hook that is not done: called again when it asked, whatever brought this sync.
		key := dueKeyOf(ps.p, s)
		wait, known := ps.env.due.lookup(key, ps.now())
		switch {
		case wait > 0:
			return wait
		case !known && s.PollInterval != nil && s.PollInterval.Duration > 0:
			// The operator restarted since the hook asked: when it last ran is not known,
			// so the call waits the whole interval, never sooner than asked, and, as any
			// wait, no later than the hook's deadline.
			if wait := min(s.PollInterval.Duration, s.HookStartTime.Add(step.EffectiveTimeout()).Sub(ps.now())); wait > 0 {
				ps.env.due.set(key, ps.now().Add(wait), ps.now())
				return wait
			}
		}
	case s.Phase == v1alpha1.StepWaiting:
		if wait := s.NextAttemptTime.Sub(ps.now()); wait > 0 {
			return wait
		}
		s.Attempts++
		s.HookStartTime = ps.timeNow()
		s.NextAttemptTime = nil
		s.Phase = d.activePhase
	}

	if !served {
		return ps.failStep(s, step, d, contract.Permanent(contract.ReasonUnknownExecutor, ps.env.executors.Missing(name)))
	}
	req, err := ps.request(ctx, r, exec, d)
	if err != nil {
		return ps.failStep(s, step, d, err)
	}

	for {
		req.Hook, req.Attempt = contract.Hook(s.Hook), s.Attempts
		req.IdempotencyKey = contract.IdempotencyKey(string(ps.p.UID), s.Name, req.Hook)
		req.State, req.Created, req.HookStarted, req.StepStarted = s.HookState, s.Created, time.Time{}, time.Time{}
		if s.HookStartTime != nil {
			req.HookStarted = s.HookStartTime.Time
		}
		if s.StartTime != nil {
			req.StepStarted = s.StartTime.Time
		}
		deadline := s.HookStartTime.Add(step.EffectiveTimeout())
		if !ps.now().Before(deadline) {
			return ps.failStep(s, step, d, contract.Retryable(contract.ReasonTimeout,
				fmt.Errorf("%s did not finish within the step's timeout of %s", s.Hook, step.EffectiveTimeout())))
		}

		if req.Hook == contract.HookCreate {
			// Recorded before Create is called: from now on the step is torn down from
			// this record, whatever happens to the spec.
			if err := ps.recordRun(r, exec, req); err != nil {
				return ps.failStep(s, step, d, err)
			}
		}
		res, err := ps.callHook(ctx, exec, req, deadline)
		s.BlockedBy, s.PollInterval = nil, nil // set again below while the hook waits
		if err != nil {
			return ps.failStep(s, step, d, fmt.Errorf("%s: %w", s.Hook, err))
		}
		if err := mergeOutputs(s, res.Outputs); err != nil {
			return ps.failStep(s, step, d, err)
		}
		if err := mergeCreated(s, res.Created); err != nil {
			return ps.failStep(s, step, d, err)
		}
		// A hook with nothing to say (often a no-op PostCreate) keeps what an earlier hook
		// of the step said, such as "VM destroyed".
		if res.Message != "" {
			s.Message = contract.Truncate(res.Message, v1alpha1.MaxStepMessageLength)
		}

		if !res.Done {
			if err := contract.CheckState(res.State); err != nil {
				return ps.failStep(s, step, d, fmt.Errorf("%s: %w", s.Hook, contract.Permanent("StateTooLarge", fmt.Errorf("the executor returned %w", err))))
			}
			s.HookState = res.State
			s.BlockedBy = blockingObjects(res.BlockedBy)
			after := res.RequeueAfter
			if after <= 0 {
				after = defaultRequeueAfter
			}
			// Look again no later than the deadline, so a timeout is noticed on time.
			after = min(after, deadline.Sub(ps.now()))
			ps.env.due.set(dueKeyOf(ps.p, s), ps.now().Add(after), ps.now())
			// What the hook asked, not bounded by the deadline: it changes, and so is
			// written, only when the hook asks another interval, not at every call.
			asked := res.RequeueAfter
			if asked <= 0 {
				asked = defaultRequeueAfter
			}
			s.PollInterval = &metav1.Duration{Duration: asked.Round(time.Second)}
			return after
		}

		s.HookState = nil
		next, more := d.next(s.Hook)
		if !more {
			ps.completeStep(s, step, d)
			return 0
		}
		s.Hook = next
		s.Attempts = 1
		s.HookStartTime = ps.timeNow()
	}
}

// beginStep puts step s at the first hook of direction d.
// waitOnRefusedPlugin holds step s, whose executor the refused plugin would serve, where it
// is, naming the plugin in its blockedBy. Nothing is due: a refusal ends only when an
// operator that verifies the plugin starts, and it syncs every pipeline then. The Event is
// recorded when the refusal is new to the step.
func (ps *pipelineSync) waitOnRefusedPlugin(s *v1alpha1.StepStatus, executorName string, refusal executor.Refusal) time.Duration {
	blockedBy := []v1alpha1.BlockingObject{{Kind: v1alpha1.BlockerPlugin, Name: refusal.Plugin}}
	message := contract.Truncate(fmt.Sprintf("its executor %s is served by the plugin %s, which the operator refused (%s): %s",
		executorName, refusal.Plugin, refusal.Reason, refusal.Message), v1alpha1.MaxStepMessageLength)
	if !slices.Equal(s.BlockedBy, blockedBy) || s.Message != message {
		ps.record(pluginRefused(s, message))
	}
	s.BlockedBy, s.Message = blockedBy, message
	return 0
}

// waitsOnRefusedPlugin tells whether step s waits on a plugin the operator refused.
func waitsOnRefusedPlugin(s *v1alpha1.StepStatus) bool {
	return slices.ContainsFunc(s.BlockedBy, func(o v1alpha1.BlockingObject) bool { return o.Kind == v1alpha1.BlockerPlugin })
}

func (ps *pipelineSync) beginStep(s *v1alpha1.StepStatus, d direction) {
	now := ps.timeNow()
	s.Phase = d.activePhase
	s.Hook = d.hooks[0]
	s.Attempts = 1
	s.HookStartTime = now
	s.NextAttemptTime = nil
	s.CompletionTime = nil
	s.HookState = nil
	s.BlockedBy = nil
	s.Message, s.Reason = "", ""
	if d.creating() {
		s.ObservedGeneration = ps.p.Generation
		s.StartTime = now
		if !ps.updatesInPlace(s.Executor) {
			// This run's outputs replace the last run's: a start time kept there would time
			// the new run out at once. An executor that updates in place reads what its
			// last run created (k8s.apply's inventory), and keeps them.
			s.Outputs = nil
		}
		if ps.started == nil {
			ps.started = map[string]int{}
		}
		ps.started[s.Name] = len(ps.events)
		ps.record(stepStarted(s))
	} else {
		ps.record(teardownStarted(s))
	}
}

// completeStep marks step s done in direction d.
func (ps *pipelineSync) completeStep(s *v1alpha1.StepStatus, step *v1alpha1.Step, d direction) {
	s.Phase = d.donePhase
	s.CompletionTime = ps.timeNow()
	s.HookStartTime = nil
	s.Reason = ""
	if d.creating() {
		// A success is in the status; an Event is for what a person must see (a failure, a
		// wait, a blocked teardown). A step that started and succeeded in one sync has no
		// Event at all, and the happy path writes none.
		if i, ok := ps.started[s.Name]; ok {
			ps.events[i].reason = "" // dropped by emitEvents
			delete(ps.started, s.Name)
		}
		ps.env.metrics.ObserveStep(step.Executor, "succeeded", s.CompletionTime.Sub(s.StartTime.Time))
		ps.stepEnded(s, nil)
	} else {
		s.Created = nil // gone with the teardown
		ps.record(stepTornDown(s))
	}
}

// failStep records a failed hook: a retry after backoff while the step's retry limit
// allows and the error is not permanent, otherwise a failed step.
func (ps *pipelineSync) failStep(s *v1alpha1.StepStatus, step *v1alpha1.Step, d direction, err error) time.Duration {
	if !d.creating() && ps.skipTeardown(s, err) {
		return 0
	}
	reason := executor.ReasonFor(err)
	policy := step.EffectiveRetry()
	if !contract.IsPermanent(err) && s.Attempts <= policy.Limit {
		delay := ps.env.jitter(policy.Backoff.Delay(s.Attempts))
		s.Phase = v1alpha1.StepWaiting
		next := metav1.NewTime(ps.now().Add(delay))
		s.NextAttemptTime = &next
		s.Message = contract.Truncate(fmt.Sprintf("attempt %d of %d failed, retrying in %s: %v",
			s.Attempts, policy.Limit+1, delay.Round(time.Millisecond), err), v1alpha1.MaxStepMessageLength)
		s.Reason = reason
		ps.record(stepRetrying(s))
		ps.env.metrics.Retry(step.Executor, string(s.Hook))
		return delay
	}

	s.Phase = v1alpha1.StepFailed
	s.NextAttemptTime = nil
	s.CompletionTime = ps.timeNow()
	if contract.IsPermanent(err) || policy.Limit == 0 {
		s.Message = contract.Truncate(err.Error(), v1alpha1.MaxStepMessageLength)
	} else {
		s.Message = contract.Truncate(fmt.Sprintf("failed after %d attempts: %v", s.Attempts, err), v1alpha1.MaxStepMessageLength)
	}
	s.Reason = reason
	if d.creating() {
		ps.record(stepFailed(s))
		if s.StartTime != nil {
			ps.env.metrics.ObserveStep(step.Executor, "failed", s.CompletionTime.Sub(s.StartTime.Time))
		}
		ps.stepEnded(s, errors.New(s.Message))
	} else {
		ps.record(teardownFailed(s))
	}
	return 0
}

// blockingObjects is the status's form of what a waiting hook says blocks it: the first
// MaxStepBlockers named ones, each cut to the API's bounds.
func blockingObjects(in []contract.Blocker) []v1alpha1.BlockingObject {
	var out []v1alpha1.BlockingObject
	for _, b := range in {
		if len(out) == v1alpha1.MaxStepBlockers {
			break
		}
		if b.Kind == "" || b.Name == "" {
			continue
		}
		out = append(out, v1alpha1.BlockingObject{
			Kind:      contract.Truncate(b.Kind, 63),
			Namespace: contract.Truncate(b.Namespace, 63),
			Name:      contract.Truncate(b.Name, 253),
		})
	}
	return out
}
