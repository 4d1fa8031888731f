package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// retirement is a finished node retirement whose cordon recorded the VM: the review's case.
func retirement(policy v1alpha1.UpdatePolicy) *v1alpha1.Pipeline {
	p := newPipeline(
		v1alpha1.Step{Name: "cordon", Executor: "test.record", With: map[string]string{"node": "$(params.node)"}},
		v1alpha1.Step{Name: "terminate", Executor: "test.record", With: map[string]string{"vm": "$(steps.cordon.outputs.vm)"}},
	)
	p.Spec.Params = map[string]string{"node": "worker-1"}
	p.Spec.UpdatePolicy = policy
	return p
}

// ranRetirement is the fixture of a node retirement under updatePolicy policy that ran to
// its end, its cordon step recording the VM vm-42 (recordVM).
func ranRetirement(t *testing.T, policy v1alpha1.UpdatePolicy) *fixture {
	t.Helper()
	f := newFixture(t, retirement(policy))
	recordVM(f)
	f.syncUntilIdle("p")
	return f
}

func recordVM(f *fixture) {
	f.exec.on("cordon", v1alpha1.HookCreate, func(context.Context, *executor.Request) (contract.Result, error) {
		return contract.DoneWithOutputs("", map[string]string{"vm": "vm-42"}), nil
	})
}

// TestEditOfAFinishedPipelineRunsNothing: by default an edit (here a raised timeout)
// re-ran every step of a finished node retirement against whatever now had the name, and
// cleared the outputs that held the safeguards. Now nothing runs, the pipeline says why
// and how to run again, and the outputs stay.
func TestEditOfAFinishedPipelineRunsNothing(t *testing.T) {
	f := ranRetirement(t, "")
	require.Equal(t, v1alpha1.PipelineSucceeded, f.get("p").Status.Phase)
	f.exec.reset()

	f.update("p", func(p *v1alpha1.Pipeline) {
		p.Generation = 2
		p.Spec.Steps[1].Timeout = nil
		p.Spec.Steps[1].Retry = &v1alpha1.RetryPolicy{Limit: 9}
	})
	f.syncUntilIdle("p")

	assert.Empty(t, f.exec.Calls(), "no step ran again")
	got := f.get("p")
	ready := readyCondition(got.Status.Conditions)
	assert.Equal(t, reasonSpecChangeRefused, ready.Reason)
	assert.Contains(t, ready.Message, "kubectl stepwise rerun p")
	assert.Equal(t, map[string]string{"vm": "vm-42"}, stepStatus(got, "cordon").Outputs, "the safeguards stay")
	assert.Contains(t, f.events(), "Warning "+reasonSpecChangeRefused)
}

// TestEachRefusedEditIsSaidOnce: the refusal is typed state (status.refusedSpecHash), not
// the Ready reason read back: a Warning for each edit refused, none for syncs of the same
// edit, and the record goes once the edit is undone.
func TestEachRefusedEditIsSaidOnce(t *testing.T) {
	f := ranRetirement(t, "")
	f.events()
	refusals := func() int {
		n := 0
		for _, e := range f.events() {
			if e == "Warning "+reasonSpecChangeRefused {
				n++
			}
		}
		return n
	}
	edit := func(limit int32) {
		f.update("p", func(p *v1alpha1.Pipeline) { p.Spec.Steps[1].Retry = &v1alpha1.RetryPolicy{Limit: limit} })
		f.syncUntilIdle("p")
	}

	edit(9)
	assert.Equal(t, 1, refusals())
	first := f.get("p").Status.RefusedSpecHash
	assert.NotEmpty(t, first)
	f.refresh("p")
	f.syncUntilIdle("p")
	assert.Zero(t, refusals(), "the same edit is not said again")

	edit(8)
	assert.Equal(t, 1, refusals(), "another edit is")
	assert.NotEqual(t, first, f.get("p").Status.RefusedSpecHash)

	f.update("p", func(p *v1alpha1.Pipeline) { p.Spec.Steps[1].Retry = retirement("").Spec.Steps[1].Retry })
	f.syncUntilIdle("p")
	got := f.get("p")
	assert.Empty(t, got.Status.RefusedSpecHash, "undone")
	assert.Equal(t, v1alpha1.PipelineSucceeded, got.Status.Phase)
}

// TestRemovedStepIsTornDownFromItsRecord: removing a step dropped its status, so what it
// created leaked. Under updatePolicy Rerun its run is retired and torn down from its
// record (the executor and parameters it ran with) before the steps run again.
func TestRemovedStepIsTornDownFromItsRecord(t *testing.T) {
	f := ranRetirement(t, v1alpha1.UpdateRerun)
	f.exec.reset()

	f.update("p", func(p *v1alpha1.Pipeline) {
		p.Generation = 2
		p.Spec.Steps = p.Spec.Steps[:1]
	})
	f.syncUntilIdle("p")

	assert.Equal(t, []string{
		"terminate/PreDelete#1", "terminate/Delete#1", "terminate/PostDelete#1",
		"cordon/PreCreate#1", "cordon/Create#1", "cordon/PostCreate#1",
	}, f.exec.Calls(), "the removed step is torn down first")
	teardown := f.exec.requests[1]
	assert.Equal(t, "terminate", teardown.Step)
	assert.Equal(t, map[string]string{"vm": "vm-42"}, teardown.Params, "from its record")
	got := f.get("p")
	assert.Equal(t, v1alpha1.PipelineSucceeded, got.Status.Phase)
	assert.Empty(t, got.Status.RetiredSteps)
	assert.Len(t, got.Status.Steps, 1)
}

// TestEditedStepIsTornDownBeforeItRunsAgain: a step whose parameters change (its executor
// does not update in place) has its last run torn down, with the old parameters, before it
// runs with the new ones; deleting the pipeline then tears down the new run.
func TestEditedStepIsTornDownBeforeItRunsAgain(t *testing.T) {
	f := ranRetirement(t, v1alpha1.UpdateRerun)
	f.exec.reset()

	f.update("p", func(p *v1alpha1.Pipeline) {
		p.Generation = 2
		p.Spec.Steps[0].With = map[string]string{"node": "worker-2"}
	})
	f.syncUntilIdle("p")
	require.Equal(t, []string{
		"cordon/PreDelete#1", "cordon/Delete#1", "cordon/PostDelete#1",
		"cordon/PreCreate#1", "cordon/Create#1", "cordon/PostCreate#1",
		"terminate/PreCreate#1", "terminate/Create#1", "terminate/PostCreate#1",
	}, f.exec.Calls())
	assert.Equal(t, "worker-1", f.exec.requests[0].Params["node"], "the old run is torn down with what it ran with")
	assert.Equal(t, "worker-2", f.exec.requests[4].Params["node"])
	f.exec.reset()

	f.delete("p")
	f.syncUntilIdle("p")
	var torn []string
	for _, r := range f.exec.requests {
		if r.Hook == contract.HookDelete {
			torn = append(torn, r.Step+":"+r.Params["node"]+r.Params["vm"])
		}
	}
	assert.Equal(t, []string{"terminate:vm-42", "cordon:worker-2"}, torn)
}

// TestStepsThatNeverRanCreateAreNotTornDown: a typo in an executor name, a parameter that
// does not resolve, or a PreCreate that failed (here Forbidden) created nothing; deleting
// such a pipeline ran teardowns that failed the same way and kept the finalizer for ever.
func TestStepsThatNeverRanCreateAreNotTornDown(t *testing.T) {
	tests := []struct {
		name  string
		step  v1alpha1.Step
		setup func(f *fixture)
	}{
		{name: "unknown executor", step: v1alpha1.Step{Name: "typo", Executor: "node.cordn"}},
		{name: "unresolved parameter", step: v1alpha1.Step{Name: "typo", Executor: "test.record", With: map[string]string{"x": "$(params.nope)"}}},
		{name: "PreCreate forbidden", step: v1alpha1.Step{Name: "typo", Executor: "test.record"}, setup: func(f *fixture) {
			f.exec.on("typo", v1alpha1.HookPreCreate, failWith(forbidden()))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, newPipeline(tt.step))
			if tt.setup != nil {
				tt.setup(f)
			}
			f.syncUntilIdle("p")
			require.Equal(t, v1alpha1.PipelineFailed, f.get("p").Status.Phase)
			f.exec.reset()

			f.delete("p")
			f.syncUntilIdle("p")
			assert.Empty(t, f.exec.Calls(), "nothing to tear down")
			assert.NotContains(t, f.get("p").Finalizers, v1alpha1.Finalizer)
		})
	}
}

// TestOrphanAnnotationReleasesABlockedTeardown: a teardown that can never succeed is left,
// on request, with a Warning Event naming what stays.
func TestOrphanAnnotationReleasesABlockedTeardown(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("one", "two")...))
	f.syncUntilIdle("p")
	f.exec.on("two", v1alpha1.HookDelete, failWith(contract.Permanent("CloudGone", errBoom)))
	f.delete("p")
	f.syncUntilIdle("p")
	got := f.get("p")
	require.Contains(t, got.Finalizers, v1alpha1.Finalizer)
	assert.Contains(t, readyCondition(got.Status.Conditions).Message, v1alpha1.TeardownPolicyAnnotation+"="+v1alpha1.TeardownOrphan)
	f.events()
	f.exec.reset()

	f.update("p", func(p *v1alpha1.Pipeline) {
		p.Annotations = map[string]string{v1alpha1.TeardownPolicyAnnotation: v1alpha1.TeardownOrphan}
	})
	f.syncUntilIdle("p")
	assert.Empty(t, f.exec.Calls())
	assert.NotContains(t, f.get("p").Finalizers, v1alpha1.Finalizer)
	assert.Equal(t, []string{"Warning TeardownOrphaned"}, f.events())
}

// TestRunRecordKeepsYAMLParametersAsDigests: the record stays small.
func TestRunRecordKeepsYAMLParametersAsDigests(t *testing.T) {
	f := newFixture(t, newPipeline(v1alpha1.Step{Name: "apply", Executor: "test.record", With: map[string]string{
		"manifest": "kind: ConfigMap\nmetadata: {name: big}\n", "note": "kept",
	}}))
	f.syncUntilIdle("p")
	ran := stepStatus(f.get("p"), "apply").Ran
	require.NotNil(t, ran)
	assert.Equal(t, "test.record", ran.Executor)
	assert.Equal(t, "kept", ran.Params["note"])
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, ran.Params["manifest"])
	assert.Equal(t, int64(1), ran.Generation)
}

func forbidden() error {
	return contract.Permanent("Forbidden", &forbiddenErr{})
}

type forbiddenErr struct{}

func (*forbiddenErr) Error() string { return "configmaps is forbidden: User cannot create" }

// TestTeardownThatCannotStartInADeletedNamespaceIsSkipped: when the namespace is being
// deleted, its RoleBindings, ServiceAccounts and Secrets go first, and a teardown then
// fails Forbidden (or SecretNotFound, or finds its executor gone) for ever: the namespace
// stayed Terminating. Such a teardown is skipped, with a Warning Event saying what was
// left; in a namespace that stays, it waits for a retry as before; an error that a retry
// can fix is retried even in a namespace being deleted.
func TestTeardownThatCannotStartInADeletedNamespaceIsSkipped(t *testing.T) {
	tests := []struct {
		name          string
		terminating   bool
		err           error
		wantFinalizer bool
		wantEvent     string
	}{
		{name: "forbidden, namespace being deleted", terminating: true, err: apierrors.NewForbidden(corev1.Resource("nodes"), "n1", errBoom), wantEvent: "Warning TeardownSkipped"},
		{name: "secret gone, namespace being deleted", terminating: true, err: contract.Retryable("SecretNotFound", errBoom), wantEvent: "Warning TeardownSkipped"},
		{name: "forbidden, namespace stays", err: apierrors.NewForbidden(corev1.Resource("nodes"), "n1", errBoom), wantFinalizer: true, wantEvent: "Warning TeardownFailed"},
		{name: "cloud busy, namespace being deleted", terminating: true, err: contract.Permanent("CloudBusy", errBoom), wantFinalizer: true, wantEvent: "Warning TeardownFailed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, newPipeline(stepsOf("one")...))
			f.syncUntilIdle("p")
			f.exec.on("one", v1alpha1.HookPreDelete, failWith(contract.Permanent(executor.ReasonFor(tt.err), tt.err)))
			if tt.terminating {
				f.terminateNamespace()
			}
			f.events()
			f.delete("p")
			f.syncUntilIdle("p")

			p := f.get("p")
			assert.Equal(t, tt.wantFinalizer, slices.Contains(p.Finalizers, v1alpha1.Finalizer))
			assert.Contains(t, f.events(), tt.wantEvent)
		})
	}
}

// TestARunStartsWithoutTheLastRunsOutputs: a re-run of a step starts without its last
// run's outputs (a wait's start time kept in its outputs would time it out at once),
// unless its executor updates in place, which needs what its last run created.
func TestARunStartsWithoutTheLastRunsOutputs(t *testing.T) {
	p := newPipeline(stepsOf("wait")...)
	p.Spec.UpdatePolicy = v1alpha1.UpdateRerun
	f := newFixture(t, p)
	f.exec.on("wait", v1alpha1.HookCreate, func(_ context.Context, req *executor.Request) (contract.Result, error) {
		if req.Outputs["wait"]["waitStarted"] != "" {
			return contract.Result{}, contract.Permanent("Timeout", errBoom)
		}
		return contract.DoneWithOutputs("", map[string]string{"waitStarted": "08:00"}), nil
	})
	f.syncUntilIdle("p")
	require.Equal(t, v1alpha1.PipelineSucceeded, f.get("p").Status.Phase)

	f.update("p", func(p *v1alpha1.Pipeline) {
		p.Generation = 2
		p.Spec.Params = map[string]string{"new": "param"}
	})
	f.syncUntilIdle("p")
	assert.Equal(t, v1alpha1.PipelineSucceeded, f.get("p").Status.Phase, "the re-run did not see the last run's start time")
}

// TestStepsThatRanBeforeRunRecordsAreStillTornDown: a pipeline that ran under an operator
// without run records (its steps have no `ran`) is torn down as it was then: every step
// that got to Create; steps that did not are not.
func TestStepsThatRanBeforeRunRecordsAreStillTornDown(t *testing.T) {
	p := newPipeline(stepsOf("done", "waiting", "checked")...)
	started := metav1.NewTime(start)
	p.Finalizers = []string{v1alpha1.Finalizer}
	p.Status.SpecHash = specHash(&p.Spec)
	p.Status.Steps = []v1alpha1.StepStatus{
		{Name: "done", Executor: "test.record", Phase: v1alpha1.StepSucceeded, Hook: v1alpha1.HookPostCreate, StartTime: &started},
		{Name: "waiting", Executor: "test.record", Phase: v1alpha1.StepRunning, Hook: v1alpha1.HookCreate, StartTime: &started},
		{Name: "checked", Executor: "test.record", Phase: v1alpha1.StepFailed, Hook: v1alpha1.HookPreCreate, StartTime: &started},
	}
	f := newFixture(t, p)
	f.delete("p")
	f.syncUntilIdle("p")
	assert.Equal(t, []string{
		"waiting/PreDelete#1", "waiting/Delete#1", "waiting/PostDelete#1",
		"done/PreDelete#1", "done/Delete#1", "done/PostDelete#1",
	}, f.exec.Calls())
}

// TestTeardownGetsWhatCreateRecorded: what a step's hooks record they created (a remote
// ID) is merged across calls, given to every later hook of the step and to its teardown,
// never to later steps, and dropped once the teardown finished. A hook that fails after
// recording still leaves it for the teardown.
func TestTeardownGetsWhatCreateRecorded(t *testing.T) {
	p := newPipeline(stepsOf("ticket", "next")...)
	p.Spec.OnFailure = v1alpha1.FailureTeardown
	f := newFixture(t, p)
	calls := 0
	f.exec.on("ticket", v1alpha1.HookCreate, func(context.Context, *executor.Request) (contract.Result, error) {
		calls++
		if calls == 1 {
			return contract.Wait(time.Second, "opened, waiting for approval").WithCreated(map[string]string{"ticket": "T-1"}), nil
		}
		return contract.Done("approved").WithCreated(map[string]string{"url": "https://tickets/T-1"}), nil
	})
	f.exec.on("next", v1alpha1.HookCreate, failWith(contract.Permanent("Rejected", errBoom)))
	f.sync("p")
	f.sync("p")
	f.clock.Step(time.Second)
	f.syncUntilIdle("p")

	want := map[string]string{"ticket": "T-1", "url": "https://tickets/T-1"}
	var teardown, next []executor.Request
	for _, req := range f.exec.requests {
		switch {
		case req.Step == "ticket" && isDeleteHook(v1alpha1.Hook(req.Hook)):
			teardown = append(teardown, req)
		case req.Step == "next":
			next = append(next, req)
		}
	}
	require.NotEmpty(t, teardown, "the failure tore the ticket step down")
	for _, req := range teardown {
		assert.Equal(t, want, req.Created, "%s gets the record", req.Hook)
	}
	for _, req := range next {
		assert.Empty(t, req.Created, "another step does not see it")
		assert.NotContains(t, req.Outputs["ticket"], "ticket", "nor as an output")
	}
	got := f.get("p")
	assert.Equal(t, v1alpha1.FailureTornDown, got.Status.Failure.Teardown)
	assert.Empty(t, stepStatus(got, "ticket").Created, "dropped once torn down")
}

// TestStepStartedHoldsAcrossRetries: a hook's start restarts with each attempt; the step's
// start does not, so a deadline across attempts can count from it.
func TestStepStartedHoldsAcrossRetries(t *testing.T) {
	f := newFixture(t, newPipeline(v1alpha1.Step{Name: "approve", Executor: "test.record",
		Retry: &v1alpha1.RetryPolicy{Limit: 2}}))
	f.exec.on("approve", v1alpha1.HookCreate, failTimes(2, errBoom))
	started := f.clock.Now()
	for range 10 {
		f.sync("p")
		f.clock.Step(time.Minute)
	}
	var creates []executor.Request
	for _, req := range f.exec.requests {
		if req.Hook == contract.HookCreate {
			creates = append(creates, req)
		}
	}
	require.Len(t, creates, 3)
	for i, req := range creates {
		assert.Equal(t, started.Unix(), req.StepStarted.Unix(), "attempt %d", i+1)
	}
	assert.NotEqual(t, creates[0].HookStarted, creates[2].HookStarted, "the hook's start is the attempt's")
}
