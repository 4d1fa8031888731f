package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// TestFinalizerIsAddedBeforeAnythingRuns: the finalizer is written first; the steps then
// start in the same sync, from what the patch returned, rather than in the one the patch's
// event would queue (a reconcile fewer per pipeline). When the patch fails nothing runs.
func TestFinalizerIsAddedBeforeAnythingRuns(t *testing.T) {
	p := newPipeline(stepsOf("a")...)
	p.Finalizers = []string{"other.example/keep"}
	f := newFixture(t, p)

	assert.Zero(t, f.sync("p"))

	assert.Equal(t, []string{"patch pipelines", "update pipelines/status"}, f.writes())
	got := f.get("p")
	assert.Equal(t, []string{"other.example/keep", v1alpha1.Finalizer}, got.Finalizers)
	assert.Equal(t, v1alpha1.PipelineSucceeded, got.Status.Phase)
	assert.Equal(t, []string{"a/PreCreate#1", "a/Create#1", "a/PostCreate#1"}, f.exec.Calls())

	refused := newPipeline(stepsOf("a")...)
	refused.Finalizers = nil
	f = newFixture(t, refused)
	f.client.PrependReactor("patch", "pipelines", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is away")
	})
	_, err := f.c.syncHandler(f.ctx, cache.ObjectName{Namespace: "ns", Name: "p"})
	require.Error(t, err)
	assert.Empty(t, f.exec.Calls(), "no hook may run before the finalizer is on")
	assert.Equal(t, []string{"patch pipelines"}, f.writes())
}

func TestThreeStepPipelineRunsHooksInOrderWithExactAPIActions(t *testing.T) {
	p := newPipeline(stepsOf("one", "two", "three")...)
	p.Finalizers = nil
	f := newFixture(t, p)

	f.syncUntilIdle("p")

	assert.Equal(t, []string{
		"one/PreCreate#1", "one/Create#1", "one/PostCreate#1",
		"two/PreCreate#1", "two/Create#1", "two/PostCreate#1",
		"three/PreCreate#1", "three/Create#1", "three/PostCreate#1",
	}, f.exec.Calls())
	// The finalizer, then one status write for the three instant steps, run in one sync;
	// and no GET or LIST (reads come from the cache).
	assert.Equal(t, []string{
		"patch pipelines",
		"update pipelines/status",
	}, f.writes())
	for _, a := range f.client.Actions() {
		assert.NotContains(t, []string{"get", "list"}, a.GetVerb(), "unexpected read %v", a)
	}

	got := f.get("p")
	assert.Equal(t, v1alpha1.PipelineSucceeded, got.Status.Phase)
	assert.Equal(t, "3/3", got.Status.Progress)
	assert.Equal(t, int64(1), got.Status.ObservedGeneration)
	assert.Empty(t, got.Status.CurrentStep)
	assert.NotNil(t, got.Status.CompletionTime)
	ready := readyCondition(got.Status.Conditions)
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	assert.Equal(t, v1alpha1.ReasonSucceeded, ready.Reason)
	assert.Equal(t, int64(1), ready.ObservedGeneration)
	for _, s := range got.Status.Steps {
		assert.Equal(t, v1alpha1.StepSucceeded, s.Phase, s.Name)
		assert.Equal(t, v1alpha1.HookPostCreate, s.Hook, s.Name)
		assert.Equal(t, int32(1), s.Attempts, s.Name)
		assert.Equal(t, metav1.ConditionTrue, readyCondition(s.Conditions).Status, s.Name)
		assert.Equal(t, "Completed", readyCondition(s.Conditions).Reason, s.Name)
	}
	assert.Empty(t, f.events(), "the happy path writes no Event: the status says it")
	assert.Equal(t, []string{"ns/runner"}, uniq(f.clients.asked), "executors act as the pipeline's ServiceAccount")
}

func uniq(in []string) []string {
	var out []string
	for _, s := range in {
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}

func TestStatusIsNotWrittenWhenUnchanged(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("a", "b")...))
	f.syncUntilIdle("p")
	f.client.ClearActions()
	f.exec.reset()

	for range 3 {
		assert.Zero(t, f.sync("p"))
	}
	assert.Empty(t, f.writes(), "a finished pipeline must cost no writes")
	assert.Empty(t, f.exec.Calls(), "a finished step must not run again")
}

func TestHookNotDoneIsLookedAtAgainAfterItsRequeue(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("drain")...))
	f.exec.on("drain", v1alpha1.HookCreate, waitFor(30*time.Second, "3 pods left"))

	assert.Equal(t, 30*time.Second, f.sync("p"))
	got := f.get("p")
	s := stepStatus(got, "drain")
	assert.Equal(t, v1alpha1.StepRunning, s.Phase)
	assert.Equal(t, v1alpha1.HookCreate, s.Hook)
	assert.Equal(t, "3 pods left", s.Message)
	assert.Equal(t, v1alpha1.PipelineRunning, got.Status.Phase)
	assert.Equal(t, "drain", got.Status.CurrentStep)
	ready := readyCondition(got.Status.Conditions)
	assert.Equal(t, v1alpha1.ReasonStepRunning, ready.Reason)
	assert.Equal(t, "step drain: 3 pods left", ready.Message)

	// Looked at again: only the hook that was not done runs, the status is unchanged.
	f.client.ClearActions()
	f.clock.Step(30 * time.Second)
	assert.Equal(t, 30*time.Second, f.sync("p"))
	assert.Equal(t, []string{"drain/PreCreate#1", "drain/Create#1", "drain/Create#1"}, f.exec.Calls())
	assert.Empty(t, f.writes(), "nothing changed, nothing written")

	f.exec.on("drain", v1alpha1.HookCreate, done)
	f.clock.Step(30 * time.Second)
	assert.Zero(t, f.sync("p"))
	assert.Equal(t, v1alpha1.PipelineSucceeded, f.get("p").Status.Phase)
}

func TestResumeAfterRestartRunsNothingTwice(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("one", "two", "three")...))
	f.exec.on("two", v1alpha1.HookCreate, waitFor(time.Minute, "working"))
	f.sync("p") // one succeeds, two waits in Create
	require.Equal(t, []string{
		"one/PreCreate#1", "one/Create#1", "one/PostCreate#1", "two/PreCreate#1", "two/Create#1",
	}, f.exec.Calls())

	assert.Equal(t, &metav1.Duration{Duration: time.Minute}, stepStatus(f.get("p"), "two").PollInterval, "the status keeps what the hook asked")

	// A new controller, with empty memory, over the persisted status: the waiting hook is
	// not called sooner than it asked, counted from the restart.
	g := f.restart()
	g.exec.reset()
	g.exec.on("two", v1alpha1.HookCreate, done)
	assert.Equal(t, time.Minute, g.sync("p"))
	g.clock.Step(59 * time.Second)
	assert.Equal(t, time.Second, g.sync("p"))
	assert.Empty(t, g.exec.Calls(), "not called before the interval it asked for")
	g.clock.Step(time.Second)
	g.syncUntilIdle("p")

	assert.Equal(t, []string{
		"two/Create#1", "two/PostCreate#1", "three/PreCreate#1", "three/Create#1", "three/PostCreate#1",
	}, g.exec.Calls())
	assert.Equal(t, v1alpha1.PipelineSucceeded, g.get("p").Status.Phase)
}

// TestAfterRestartAWaitingHookIsCalledByItsDeadline: the wait restored after a restart
// ends no later than the hook's deadline, as every wait does.
func TestAfterRestartAWaitingHookIsCalledByItsDeadline(t *testing.T) {
	step := v1alpha1.Step{Name: "two", Executor: "test.record", Timeout: &metav1.Duration{Duration: 90 * time.Second}}
	f := newFixture(t, newPipeline(step))
	f.exec.on("two", v1alpha1.HookCreate, waitFor(time.Minute, "working"))
	assert.Equal(t, time.Minute, f.sync("p"))
	f.clock.Step(50 * time.Second)

	g := f.restart()
	assert.Equal(t, 40*time.Second, g.sync("p"), "the deadline is 40s away, the interval 60s")
}

func TestInstantStepsRunInOneSyncUntilAHookWaits(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("one", "two", "three")...))
	f.exec.on("two", v1alpha1.HookCreate, waitFor(time.Minute, "working"))

	assert.Equal(t, time.Minute, f.sync("p"))

	assert.Equal(t, []string{
		"one/PreCreate#1", "one/Create#1", "one/PostCreate#1", "two/PreCreate#1", "two/Create#1",
	}, f.exec.Calls())
	assert.Equal(t, []string{"update pipelines/status"}, f.writes(), "one write, before the wait")
	got := f.get("p")
	assert.Equal(t, v1alpha1.StepSucceeded, stepStatus(got, "one").Phase)
	assert.Equal(t, v1alpha1.StepRunning, stepStatus(got, "two").Phase)
	assert.Equal(t, v1alpha1.HookCreate, stepStatus(got, "two").Hook)
	assert.Equal(t, v1alpha1.StepPending, stepStatus(got, "three").Phase)
	assert.Equal(t, "two", got.Status.CurrentStep)
	assert.Equal(t, "1/3", got.Status.Progress)
	assert.Equal(t, []string{"Normal StepStarted"}, f.events(), "one started and succeeded at once (no Event), two waits")
}

func TestSlowStepsAreWrittenDownBeforeTheNextStarts(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("one", "two")...))
	f.exec.on("one", v1alpha1.HookCreate, takes(f.clock, maxBatchDuration))

	assert.Zero(t, f.sync("p"))
	assert.Equal(t, []string{"one/PreCreate#1", "one/Create#1", "one/PostCreate#1"}, f.exec.Calls())
	assert.Equal(t, []string{"update pipelines/status"}, f.writes())
	assert.Equal(t, v1alpha1.StepPending, stepStatus(f.get("p"), "two").Phase)

	f.sync("p")
	assert.Equal(t, v1alpha1.PipelineSucceeded, f.get("p").Status.Phase)
}

func TestFailedStatusWriteRunsTheSyncsHooksAgain(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("one", "two")...))
	f.client.PrependReactor("update", "pipelines", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	_, err := f.c.syncHandler(f.ctx, cache.ObjectName{Namespace: "ns", Name: "p"})
	require.Error(t, err)
	assert.Empty(t, f.events(), "events tell only what the status says")

	// As after a crash: nothing was written, so the hooks run again (at least once).
	f.client.ReactionChain = f.client.ReactionChain[1:]
	f.exec.reset()
	f.syncUntilIdle("p")
	assert.Equal(t, []string{
		"one/PreCreate#1", "one/Create#1", "one/PostCreate#1", "two/PreCreate#1", "two/Create#1", "two/PostCreate#1",
	}, f.exec.Calls())
	assert.Equal(t, v1alpha1.PipelineSucceeded, f.get("p").Status.Phase)
}

func TestRetryBackoffTiming(t *testing.T) {
	step := v1alpha1.Step{Name: "flaky", Executor: "test.record", Retry: &v1alpha1.RetryPolicy{
		Limit:   3,
		Backoff: &v1alpha1.Backoff{Initial: &metav1.Duration{Duration: 2 * time.Second}, Factor: 3, Max: &metav1.Duration{Duration: 10 * time.Second}},
	}}
	f := newFixture(t, newPipeline(step))
	f.exec.on("flaky", v1alpha1.HookCreate, failTimes(3, errBoom))

	// Attempt 1 fails: wait 2s.
	assert.Equal(t, 2*time.Second, f.sync("p"))
	s := stepStatus(f.get("p"), "flaky")
	assert.Equal(t, v1alpha1.StepWaiting, s.Phase)
	assert.Equal(t, int32(1), s.Attempts)
	require.NotNil(t, s.NextAttemptTime)
	assert.Equal(t, start.Add(2*time.Second), s.NextAttemptTime.UTC())
	assert.Contains(t, s.Message, "attempt 1 of 4 failed, retrying in 2s: Create: boom")
	assert.Equal(t, v1alpha1.ReasonStepRetrying, readyCondition(f.get("p").Status.Conditions).Reason)

	// Too early: nothing runs, the remaining wait is returned.
	f.clock.Step(500 * time.Millisecond)
	assert.Equal(t, 1500*time.Millisecond, f.sync("p"))
	assert.Len(t, f.exec.Calls(), 2)

	// Attempt 2 fails: 6s. Attempt 3 fails: 18s capped at 10s. Attempt 4 succeeds.
	f.clock.Step(1500 * time.Millisecond)
	assert.Equal(t, 6*time.Second, f.sync("p"))
	f.clock.Step(6 * time.Second)
	assert.Equal(t, 10*time.Second, f.sync("p"))
	f.clock.Step(10 * time.Second)
	assert.Zero(t, f.sync("p"))

	assert.Equal(t, []string{
		"flaky/PreCreate#1", "flaky/Create#1", "flaky/Create#2", "flaky/Create#3", "flaky/Create#4", "flaky/PostCreate#1",
	}, f.exec.Calls())
	assert.Equal(t, v1alpha1.PipelineSucceeded, f.get("p").Status.Phase)
	assert.Equal(t, []string{
		"Normal StepStarted", "Warning StepRetrying", "Warning StepRetrying", "Warning StepRetrying",
	}, f.events(), "a success adds no Event")
}

func TestFailures(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n1",
		errors.New(`User "system:serviceaccount:ns:runner" cannot patch resource "nodes"`))
	tests := []struct {
		name        string
		step        v1alpha1.Step
		script      hookFunc
		wantReason  string
		wantMessage string
		wantCalls   []string
	}{
		{
			name:        "permanent error fails at once despite retries",
			step:        v1alpha1.Step{Name: "a", Executor: "test.record", Retry: &v1alpha1.RetryPolicy{Limit: 5}},
			script:      failWith(contract.Permanent("InvalidParameter", errors.New(`parameter "node" is required`))),
			wantReason:  "InvalidParameter",
			wantMessage: `step a failed: Create: parameter "node" is required`,
			wantCalls:   []string{"a/PreCreate#1", "a/Create#1"},
		},
		{
			name:        "retries exhausted keeps the cause's reason",
			step:        v1alpha1.Step{Name: "a", Executor: "test.record", Retry: &v1alpha1.RetryPolicy{Limit: 1}},
			script:      failWith(forbidden),
			wantReason:  "Forbidden",
			wantMessage: "step a failed: failed after 2 attempts: Create: nodes \"n1\" is forbidden",
			wantCalls:   []string{"a/PreCreate#1", "a/Create#1", "a/Create#2"},
		},
		{
			name:        "unknown executor",
			step:        v1alpha1.Step{Name: "a", Executor: "no.such"},
			wantReason:  "UnknownExecutor",
			wantMessage: `step a failed: no executor named "no.such" is registered`,
		},
		{
			name: "executor panic is a retryable error",
			step: v1alpha1.Step{Name: "a", Executor: "test.record", Retry: &v1alpha1.RetryPolicy{Limit: 0}},
			script: func(context.Context, *executor.Request) (contract.Result, error) {
				panic("nil map")
			},
			wantReason:  contract.ReasonHookFailed,
			wantMessage: "step a failed: Create: executor test.record panicked: nil map",
			wantCalls:   []string{"a/PreCreate#1", "a/Create#1"},
		},
		{
			name: "outputs too large",
			step: v1alpha1.Step{Name: "a", Executor: "test.record"},
			script: func(context.Context, *executor.Request) (contract.Result, error) {
				return contract.DoneWithOutputs("", map[string]string{"big": strings.Repeat("x", 5000)}), nil
			},
			wantReason:  "OutputsTooLarge",
			wantMessage: "step a failed: the executor returned 1 outputs of 5003 bytes",
			wantCalls:   []string{"a/PreCreate#1", "a/Create#1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, newPipeline(tt.step, v1alpha1.Step{Name: "after", Executor: "test.record"}))
			if tt.script != nil {
				f.exec.on("a", v1alpha1.HookCreate, tt.script)
			}
			for range 10 {
				f.sync("p")
				f.clock.Step(time.Minute) // past any backoff
			}
			got := f.get("p")
			assert.Equal(t, v1alpha1.PipelineFailed, got.Status.Phase)
			assert.Equal(t, "a", got.Status.CurrentStep)
			ready := readyCondition(got.Status.Conditions)
			assert.Equal(t, metav1.ConditionFalse, ready.Status)
			assert.Equal(t, v1alpha1.ReasonStepFailed, ready.Reason)
			assert.Contains(t, ready.Message, tt.wantMessage)
			s := stepStatus(got, "a")
			assert.Equal(t, v1alpha1.StepFailed, s.Phase)
			assert.Equal(t, tt.wantReason, readyCondition(s.Conditions).Reason)
			assert.Equal(t, len(tt.wantCalls), len(f.exec.Calls()), "the step after a failed one never runs")
			if tt.wantCalls != nil {
				assert.Equal(t, tt.wantCalls, f.exec.Calls())
			}
			assert.Equal(t, v1alpha1.StepPending, stepStatus(got, "after").Phase)
		})
	}
}

func TestTimeoutCountsNotDoneTimeAndFails(t *testing.T) {
	step := v1alpha1.Step{Name: "slow", Executor: "test.record",
		Timeout: &metav1.Duration{Duration: time.Minute}, Retry: &v1alpha1.RetryPolicy{Limit: 0}}
	f := newFixture(t, newPipeline(step))
	f.exec.on("slow", v1alpha1.HookCreate, waitFor(45*time.Second, "still going"))

	assert.Equal(t, 45*time.Second, f.sync("p"))
	f.clock.Step(45 * time.Second)
	// Asked to wait 45s again, but the timeout is 15s away: look then.
	assert.Equal(t, 15*time.Second, f.sync("p"))
	f.clock.Step(15 * time.Second)
	assert.Zero(t, f.sync("p"))

	got := f.get("p")
	assert.Equal(t, v1alpha1.PipelineFailed, got.Status.Phase)
	s := stepStatus(got, "slow")
	assert.Equal(t, contract.ReasonTimeout, readyCondition(s.Conditions).Reason)
	assert.Contains(t, s.Message, "Create did not finish within the step's timeout of 1m0s")
	assert.Equal(t, []string{"slow/PreCreate#1", "slow/Create#1", "slow/Create#1"}, f.exec.Calls())
}

func TestHookContextCarriesTheAttemptDeadline(t *testing.T) {
	step := v1alpha1.Step{Name: "a", Executor: "test.record", Timeout: &metav1.Duration{Duration: 90 * time.Second}}
	f := newFixture(t, newPipeline(step))
	var deadline time.Time
	f.exec.on("a", v1alpha1.HookCreate, func(ctx context.Context, _ *executor.Request) (contract.Result, error) {
		deadline, _ = ctx.Deadline()
		return contract.Result{Done: true}, nil
	})
	f.sync("p")
	assert.Equal(t, start.Add(90*time.Second), deadline.UTC())
}

func TestSuspendStopsBeforeTheNextHook(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("one", "two")...))
	f.exec.on("one", v1alpha1.HookPostCreate, takes(f.clock, maxBatchDuration))
	f.sync("p") // one succeeds, slowly enough that two waits for the next sync
	f.update("p", func(p *v1alpha1.Pipeline) { p.Spec.Suspend = true; p.Generation = 2 })
	f.exec.reset()

	f.sync("p")
	got := f.get("p")
	assert.Empty(t, f.exec.Calls())
	assert.Equal(t, v1alpha1.PipelineSuspended, got.Status.Phase)
	assert.Equal(t, "two", got.Status.CurrentStep)
	assert.Equal(t, v1alpha1.ReasonSuspended, readyCondition(got.Status.Conditions).Reason)

	f.update("p", func(p *v1alpha1.Pipeline) { p.Spec.Suspend = false; p.Generation = 3 })
	f.syncUntilIdle("p")
	got = f.get("p")
	assert.Equal(t, v1alpha1.PipelineSucceeded, got.Status.Phase)
	assert.Equal(t, int64(3), got.Status.ObservedGeneration)
	// Suspend and resume change only suspend: the pipeline goes on where it stopped.
	assert.Equal(t, []string{"two/PreCreate#1", "two/Create#1", "two/PostCreate#1"}, f.exec.Calls())
}

func TestNewGenerationRerunsStepsAndRecordsIt(t *testing.T) {
	p := newPipeline(stepsOf("one", "two")...)
	p.Spec.UpdatePolicy = v1alpha1.UpdateRerun
	f := newFixture(t, p)
	f.syncUntilIdle("p")
	first := f.get("p").Status.Steps[0].StartTime
	f.exec.reset()

	f.clock.Step(time.Hour)
	f.update("p", func(p *v1alpha1.Pipeline) {
		p.Generation = 2
		p.Spec.Steps = append(p.Spec.Steps, v1alpha1.Step{Name: "three", Executor: "test.record"})
	})
	f.syncUntilIdle("p")

	got := f.get("p")
	assert.Equal(t, int64(2), got.Status.ObservedGeneration)
	assert.Equal(t, "3/3", got.Status.Progress)
	assert.Equal(t, int64(2), readyCondition(got.Status.Conditions).ObservedGeneration)
	for _, s := range got.Status.Steps {
		assert.Equal(t, int64(2), s.ObservedGeneration, s.Name)
	}
	assert.True(t, got.Status.Steps[0].StartTime.After(first.Time), "step one ran again")
	assert.Len(t, f.exec.Calls(), 9)
}

func TestNewGenerationRetriesAFailedPipeline(t *testing.T) {
	p := newPipeline(stepsOf("one")...)
	p.Spec.UpdatePolicy = v1alpha1.UpdateRerun
	f := newFixture(t, p)
	f.exec.on("one", v1alpha1.HookCreate, failWith(contract.Permanent("Bad", errBoom)))
	f.sync("p")
	require.Equal(t, v1alpha1.PipelineFailed, f.get("p").Status.Phase)

	f.exec.on("one", v1alpha1.HookCreate, done)
	f.update("p", func(p *v1alpha1.Pipeline) {
		p.Generation = 2
		p.Spec.Params = map[string]string{"fixed": "yes"}
	})
	f.syncUntilIdle("p")
	assert.Equal(t, v1alpha1.PipelineSucceeded, f.get("p").Status.Phase)
}

func TestFailedPipelineStaysFailedUntilRetryAnnotation(t *testing.T) {
	tests := []struct {
		name      string
		value     string
		wantCalls []string
		wantEvent string
	}{
		{
			name:      "empty value retries the failed step",
			value:     "",
			wantCalls: []string{"two/PreCreate#1", "two/Create#1", "two/PostCreate#1", "three/PreCreate#1", "three/Create#1", "three/PostCreate#1"},
			wantEvent: "Normal RetryRequested",
		},
		{
			name:  "a step name retries from that step",
			value: "one",
			wantCalls: []string{"one/PreCreate#1", "one/Create#1", "one/PostCreate#1",
				"two/PreCreate#1", "two/Create#1", "two/PostCreate#1", "three/PreCreate#1", "three/Create#1", "three/PostCreate#1"},
			wantEvent: "Normal RetryRequested",
		},
		{
			name:      "an unknown step name is ignored with a warning",
			value:     "nope",
			wantEvent: "Warning RetryIgnored",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, newPipeline(stepsOf("one", "two", "three")...))
			f.exec.on("two", v1alpha1.HookCreate, failWith(contract.Permanent("Bad", errBoom)))
			f.syncUntilIdle("p")
			require.Equal(t, v1alpha1.PipelineFailed, f.get("p").Status.Phase)

			// Failed stays failed: more syncs run nothing and write nothing.
			f.exec.reset()
			f.client.ClearActions()
			f.sync("p")
			f.sync("p")
			assert.Empty(t, f.exec.Calls())
			assert.Empty(t, f.writes())
			f.events()

			f.exec.on("two", v1alpha1.HookCreate, done)
			f.update("p", func(p *v1alpha1.Pipeline) {
				p.Annotations = map[string]string{v1alpha1.RetryAnnotation: tt.value}
			})
			f.syncUntilIdle("p")

			assert.Equal(t, len(tt.wantCalls), len(f.exec.Calls()))
			if tt.wantCalls != nil {
				assert.Equal(t, tt.wantCalls, f.exec.Calls())
			}
			assert.NotContains(t, f.get("p").Annotations, v1alpha1.RetryAnnotation, "the annotation is removed once honoured")
			assert.Contains(t, f.events(), tt.wantEvent)
			if tt.wantCalls != nil {
				assert.Equal(t, v1alpha1.PipelineSucceeded, f.get("p").Status.Phase)
			} else {
				assert.Equal(t, v1alpha1.PipelineFailed, f.get("p").Status.Phase)
			}
		})
	}
}

func TestParameterSubstitution(t *testing.T) {
	tests := []struct {
		name      string
		with      map[string]string
		wantParam string // the value the executor gets for "x"
		wantErr   string
	}{
		{name: "plain value", with: map[string]string{"x": "plain"}, wantParam: "plain"},
		{name: "pipeline parameter", with: map[string]string{"x": "node=$(params.node)"}, wantParam: "node=n1"},
		{name: "earlier step output", with: map[string]string{"x": "$(steps.first.outputs.id)-$(params.node)"}, wantParam: "vm-42-n1"},
		{name: "missing parameter", with: map[string]string{"x": "$(params.zone)"}, wantErr: `parameter "x": $(params.zone): the pipeline has no parameter "zone"`},
		{name: "later step", with: map[string]string{"x": "$(steps.last.outputs.id)"}, wantErr: `step "last" does not run before this step`},
		{name: "no such step", with: map[string]string{"x": "$(steps.ghost.outputs.id)"}, wantErr: `the pipeline has no step "ghost"`},
		{name: "no such output", with: map[string]string{"x": "$(steps.first.outputs.ip)"}, wantErr: `step "first" has no output "ip"`},
		{name: "malformed reference", with: map[string]string{"x": "$(param.node)"}, wantErr: `$(param.node): not a reference`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPipeline(
				v1alpha1.Step{Name: "first", Executor: "test.record"},
				v1alpha1.Step{Name: "uses", Executor: "test.record", With: tt.with},
				v1alpha1.Step{Name: "last", Executor: "test.record"},
			)
			p.Spec.Params = map[string]string{"node": "n1"}
			f := newFixture(t, p)
			f.exec.on("first", v1alpha1.HookCreate, func(context.Context, *executor.Request) (contract.Result, error) {
				return contract.DoneWithOutputs("", map[string]string{"id": "vm-42"}), nil
			})
			f.syncUntilIdle("p")

			got := f.get("p")
			if tt.wantErr != "" {
				s := stepStatus(got, "uses")
				assert.Equal(t, v1alpha1.StepFailed, s.Phase)
				assert.Equal(t, "InvalidReference", readyCondition(s.Conditions).Reason)
				assert.Contains(t, s.Message, tt.wantErr)
				assert.NotContains(t, f.exec.Calls(), "uses/PreCreate#1", "no hook runs with unresolved parameters")
				return
			}
			assert.Equal(t, v1alpha1.PipelineSucceeded, got.Status.Phase)
			var req executor.Request
			for _, r := range f.exec.requests {
				if r.Step == "uses" {
					req = r
				}
			}
			assert.Equal(t, tt.wantParam, req.Params["x"])
			assert.Equal(t, map[string]map[string]string{"first": {"id": "vm-42"}}, req.Outputs)
			assert.Equal(t, "uid-1/uses/PostCreate", req.IdempotencyKey)
			assert.Equal(t, "runner", req.ServiceAccountName)
		})
	}
}

func TestDeletionTearsDownStartedStepsInReverse(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("one", "two", "three", "four")...))
	// three waits in Create: it started, four never did.
	f.exec.on("three", v1alpha1.HookCreate, waitFor(time.Minute, "busy"))
	f.syncUntilIdle("p")
	f.exec.reset()
	f.client.ClearActions()

	f.delete("p")
	f.syncUntilIdle("p")

	assert.Equal(t, []string{
		"three/PreDelete#1", "three/Delete#1", "three/PostDelete#1",
		"two/PreDelete#1", "two/Delete#1", "two/PostDelete#1",
		"one/PreDelete#1", "one/Delete#1", "one/PostDelete#1",
	}, f.exec.Calls(), "only started steps, last first")
	assert.Equal(t, []string{"patch pipelines"}, f.writes(),
		"instant teardowns run in one sync: the finalizer comes off, no status write is needed")
	assert.NotContains(t, f.get("p").Finalizers, v1alpha1.Finalizer)
}

func TestTeardownThatWaitsIsWrittenDownBeforeTheNext(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("one", "two", "three")...))
	f.syncUntilIdle("p")
	f.exec.on("two", v1alpha1.HookDelete, waitFor(time.Minute, "VM shutting down"))
	f.exec.reset()
	f.client.ClearActions()

	f.delete("p")
	f.sync("p")
	assert.Equal(t, []string{
		"three/PreDelete#1", "three/Delete#1", "three/PostDelete#1",
		"two/PreDelete#1", "two/Delete#1",
	}, f.exec.Calls(), "three torn down at once, two waits")
	assert.Equal(t, []string{"update pipelines/status"}, f.writes())
	got := f.get("p")
	assert.Equal(t, v1alpha1.StepDeleted, stepStatus(got, "three").Phase)
	assert.Equal(t, v1alpha1.StepDeleting, stepStatus(got, "two").Phase)
	assert.Equal(t, "VM shutting down", stepStatus(got, "two").Message)
	assert.Contains(t, got.Finalizers, v1alpha1.Finalizer)
}

func TestTeardownOwnOutputsAreGiven(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("cordon")...))
	f.exec.on("cordon", v1alpha1.HookCreate, func(context.Context, *executor.Request) (contract.Result, error) {
		return contract.DoneWithOutputs("", map[string]string{"wasSchedulable": "true"}), nil
	})
	f.syncUntilIdle("p")
	f.delete("p")
	f.syncUntilIdle("p")
	assert.Equal(t, map[string]map[string]string{"cordon": {"wasSchedulable": "true"}}, f.exec.lastRequest().Outputs)
}

func TestFailingTeardownKeepsTheFinalizerAndSaysWhy(t *testing.T) {
	step := v1alpha1.Step{Name: "two", Executor: "test.record", Retry: &v1alpha1.RetryPolicy{Limit: 1}}
	f := newFixture(t, newPipeline(v1alpha1.Step{Name: "one", Executor: "test.record"}, step))
	f.syncUntilIdle("p")
	f.exec.on("two", v1alpha1.HookDelete, failWith(errors.New("cloud API unavailable")))
	f.delete("p")

	for range 5 {
		f.sync("p")
		f.clock.Step(time.Minute)
	}
	got := f.get("p")
	assert.Contains(t, got.Finalizers, v1alpha1.Finalizer)
	assert.Equal(t, v1alpha1.PipelineDeleting, got.Status.Phase)
	assert.Equal(t, "two", got.Status.CurrentStep)
	ready := readyCondition(got.Status.Conditions)
	assert.Equal(t, v1alpha1.ReasonTeardownFailed, ready.Reason)
	assert.Contains(t, ready.Message, "teardown of step two is blocked: failed after 2 attempts: Delete: cloud API unavailable")
	assert.NotContains(t, f.exec.Calls(), "one/PreDelete#1", "an earlier step is not torn down past a blocked one")
	assert.Contains(t, f.events(), "Warning TeardownFailed")

	// Fix the cause and ask for a retry: teardown finishes and the finalizer comes off.
	f.exec.on("two", v1alpha1.HookDelete, done)
	f.update("p", func(p *v1alpha1.Pipeline) { p.Annotations = map[string]string{v1alpha1.RetryAnnotation: ""} })
	f.syncUntilIdle("p")
	assert.NotContains(t, f.get("p").Finalizers, v1alpha1.Finalizer)
	assert.Contains(t, f.exec.Calls(), "one/PostDelete#1")
}

func TestDeletionWithoutFinalizerDoesNothing(t *testing.T) {
	p := newPipeline(stepsOf("a")...)
	p.Finalizers = []string{"other.example/keep"}
	now := metav1.NewTime(start)
	p.DeletionTimestamp = &now
	f := newFixture(t, p)
	f.sync("p")
	assert.Empty(t, f.writes())
	assert.Empty(t, f.exec.Calls())
}

func TestMissingPipelineIsForgotten(t *testing.T) {
	f := newFixture(t)
	assert.Zero(t, f.sync("gone"))
	assert.Empty(t, f.writes())
}

func TestClientErrorIsRetried(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("a")...))
	f.clients.err = errors.New("no credentials")
	assert.Equal(t, time.Second, f.sync("p"))
	s := stepStatus(f.get("p"), "a")
	assert.Equal(t, v1alpha1.StepWaiting, s.Phase)
	assert.Equal(t, "ClientError", readyCondition(s.Conditions).Reason)
	assert.Empty(t, f.exec.Calls())
}

func TestMessagesAreBounded(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("a")...))
	f.exec.on("a", v1alpha1.HookCreate, waitFor(time.Second, strings.Repeat("é", 2000)))
	f.sync("p")
	got := f.get("p")
	msg := stepStatus(got, "a").Message
	assert.LessOrEqual(t, len(msg), v1alpha1.MaxStepMessageLength)
	assert.True(t, strings.HasSuffix(msg, "..."))
	assert.LessOrEqual(t, len(readyCondition(got.Status.Conditions).Message), v1alpha1.MaxStepMessageLength)
}

func TestConditionTransitionTimeChangesOnlyOnFlip(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("a")...))
	f.exec.on("a", v1alpha1.HookCreate, waitFor(time.Second, "1 left"))
	f.sync("p")
	first := readyCondition(f.get("p").Status.Conditions)
	require.Equal(t, metav1.ConditionFalse, first.Status)
	assert.Equal(t, []string{"Normal StepStarted"}, f.events())

	f.clock.Step(time.Minute)
	f.exec.on("a", v1alpha1.HookCreate, waitFor(time.Second, "0 left"))
	f.sync("p")
	second := readyCondition(f.get("p").Status.Conditions)
	assert.Equal(t, "step a: 0 left", second.Message, "the message follows the step")
	assert.Equal(t, first.LastTransitionTime, second.LastTransitionTime, "still False: no transition")
	assert.Empty(t, f.events(), "waiting again is not a transition worth an Event")

	f.clock.Step(time.Minute)
	f.exec.on("a", v1alpha1.HookCreate, done)
	f.sync("p")
	third := readyCondition(f.get("p").Status.Conditions)
	assert.Equal(t, metav1.ConditionTrue, third.Status)
	assert.Equal(t, start.Add(2*time.Minute), third.LastTransitionTime.UTC())
}

// A sync that follows our own writes must start from them, even when the informer has not
// delivered them yet: with the retry annotation, the status write and the annotation's
// removal are two writes, and a sync of the state between them (or before them) would run
// the retried steps a second time.
func TestSyncAfterOwnWritesIgnoresAStaleCache(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("one", "two")...))
	f.exec.on("two", v1alpha1.HookCreate, failWith(contract.Permanent("Bad", errBoom)))
	f.syncUntilIdle("p")
	require.Equal(t, v1alpha1.PipelineFailed, f.get("p").Status.Phase)

	f.exec.on("two", v1alpha1.HookCreate, done)
	f.update("p", func(p *v1alpha1.Pipeline) { p.Annotations = map[string]string{v1alpha1.RetryAnnotation: ""} })
	f.exec.reset()
	f.client.ClearActions()
	key := cache.ObjectName{Namespace: "ns", Name: "p"}
	_, err := f.c.syncHandler(f.ctx, key)
	require.NoError(t, err)
	require.Len(t, f.writes(), 2, "the status and the annotation's removal")
	require.Equal(t, []string{"two/PreCreate#1", "two/Create#1", "two/PostCreate#1"}, f.exec.Calls())

	// The informer still holds the failed pipeline with its retry annotation.
	cached, exists, err := f.indexer.GetByKey("ns/p")
	require.NoError(t, err)
	require.True(t, exists)
	require.Contains(t, cached.(*v1alpha1.Pipeline).Annotations, v1alpha1.RetryAnnotation)
	_, err = f.c.syncHandler(f.ctx, key)
	require.NoError(t, err)
	assert.Len(t, f.exec.Calls(), 3, "no hook ran again")
	assert.Len(t, f.writes(), 2, "nothing was written again")
	assert.Equal(t, v1alpha1.PipelineSucceeded, f.get("p").Status.Phase)
}

func TestStepKeepsTheLastMessageAHookGave(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("one")...))
	f.exec.on("one", v1alpha1.HookCreate, func(context.Context, *executor.Request) (contract.Result, error) {
		return contract.Done("VM destroyed"), nil
	})
	f.syncUntilIdle("p")
	s := f.get("p").Status.Steps[0]
	require.Equal(t, v1alpha1.StepSucceeded, s.Phase)
	assert.Equal(t, "VM destroyed", s.Message, "PostCreate said nothing")
	ready := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, "VM destroyed", ready.Message)
}

// TestAWaitingStepNamesWhatBlocksIt: the objects a waiting hook names are the step's
// blockedBy, bounded, and gone once the hook moves on.
func TestAWaitingStepNamesWhatBlocksIt(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("drain")...))
	many := []contract.Blocker{{Kind: "PodDisruptionBudget", Namespace: "apps", Name: "web"}, {Kind: "", Name: "nameless kind"}}
	for i := range 20 {
		many = append(many, contract.Blocker{Kind: "PodDisruptionBudget", Namespace: "db", Name: fmt.Sprintf("db-%02d", i)})
	}
	f.exec.on("drain", v1alpha1.HookCreate, func(context.Context, *executor.Request) (contract.Result, error) {
		return contract.Wait(time.Second, "22 pods left").Blocked(many...), nil
	})
	f.sync("p")
	blocked := stepStatus(f.get("p"), "drain").BlockedBy
	require.Len(t, blocked, v1alpha1.MaxStepBlockers)
	assert.Equal(t, v1alpha1.BlockingObject{Kind: "PodDisruptionBudget", Namespace: "apps", Name: "web"}, blocked[0])
	assert.Equal(t, "db-00", blocked[1].Name, "one with no kind is left out")

	f.exec.on("drain", v1alpha1.HookCreate, done)
	f.clock.Step(time.Second)
	f.syncUntilIdle("p")
	s := stepStatus(f.get("p"), "drain")
	assert.Equal(t, v1alpha1.StepSucceeded, s.Phase)
	assert.Empty(t, s.BlockedBy)
}

// TestAWaitingHookIsCalledOncePerInterval: a hook that waits is called again when it
// asked, not when a sync comes earlier: the engine's own status write comes back through
// the informer at once, and used to call it again within milliseconds.
func TestAWaitingHookIsCalledOncePerInterval(t *testing.T) {
	tests := []struct {
		name    string
		message func(call int) string
	}{
		{name: "a message that changes each call", message: func(call int) string { return fmt.Sprintf("%ds of 20m0s", 10*call) }},
		{name: "the same message each call", message: func(int) string { return "not yet" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, newPipeline(stepsOf("ready")...))
			calls := 0
			f.exec.on("ready", v1alpha1.HookCreate, func(context.Context, *executor.Request) (contract.Result, error) {
				calls++
				return contract.Wait(10*time.Second, tt.message(calls)), nil
			})
			f.sync("p") // the finalizer
			for interval := 1; interval <= 3; interval++ {
				// Each interval: the sync it asked for, then the syncs an informer brings.
				assert.Equal(t, 10*time.Second, f.sync("p"))
				for k := 1; k <= 3; k++ {
					f.clock.Step(time.Second)
					assert.Equal(t, 10*time.Second-time.Duration(k)*time.Second, f.sync("p"), "looked at again when it asked")
				}
				assert.Equal(t, interval, calls, "one call in interval %d", interval)
				f.clock.Step(7 * time.Second)
			}
		})
	}
}
