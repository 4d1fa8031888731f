package trigger

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// failPipeline makes the pipeline of obj fail at step drain, now; torn down after its
// failure when tornDown (onFailure Teardown: it no longer holds its place).
func failPipeline(f *fixture, obj *unstructured.Unstructured, tornDown bool) {
	f.t.Helper()
	now := metav1.NewTime(f.clock.Now())
	f.setPipelineStatus(rules.PipelineName("retire", obj.GetName(), obj.GetUID()), func(s *v1alpha1.PipelineStatus) {
		s.Phase, s.CurrentStep = v1alpha1.PipelinePhase(v1alpha1.PipelineFailed), "drain"
		s.Steps = []v1alpha1.StepStatus{{Name: "drain", Phase: v1alpha1.StepFailed, CompletionTime: &now}}
		if tornDown {
			s.Failure = &v1alpha1.FailureRecord{Step: "drain", Since: now, Teardown: v1alpha1.FailureTornDown}
		}
	})
}

// TestFailureBudgetStopsTheTrigger: after failureBudget pipelines fail, torn down or not,
// nothing new starts (those running go on), Ready says which failed, and a Warning each;
// a resume counts from zero: the budget counts the pipelines started since.
func TestFailureBudgetStopsTheTrigger(t *testing.T) {
	var nodes []*unstructured.Unstructured
	in := objs(newTemplate("retire-node"))
	trig := triggertest.Trigger()
	trig.Spec.Concurrency, trig.Spec.FailureBudget = 3, 2
	in = append(in, trig)
	for i := range 6 {
		n := triggertest.Node("n"+string(rune('0'+i)), time.Duration(i)*time.Second, retiring)
		nodes = append(nodes, n)
		in = append(in, n)
	}
	f := newFixture(t, in)
	f.sync("retire")
	require.Len(t, f.pipelineList(), 3)
	assert.Equal(t, int32(2), f.trigger("retire").Status.FailureBudgetLeft)
	f.events()

	failPipeline(f, nodes[0], true)
	f.sync("retire")
	got := f.trigger("retire")
	assert.Len(t, f.pipelineList(), 4, "one failure of two: n3 takes n0's place")
	assert.Equal(t, int32(1), got.Status.FailureBudgetLeft)
	assert.Contains(t, f.events(), "Warning PipelineFailed pipeline "+rules.PipelineName("retire", "n0", nodes[0].GetUID())+" of n0 failed at step drain: 1 of the failure budget of 2 spent")

	failPipeline(f, nodes[1], true)
	f.sync("retire")
	f.sync("retire")
	got = f.trigger("retire")
	assert.Len(t, f.pipelineList(), 4, "the budget is spent: nothing new starts")
	assert.Equal(t, int32(0), got.Status.FailureBudgetLeft)
	require.Len(t, got.Status.Failures, 2)
	assert.Equal(t, "n1", got.Status.Failures[1].Object)
	ready := readyOf(got)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, v1alpha1.TriggerReasonFailureBudgetSpent, ready.Reason)
	assert.Contains(t, ready.Message, "2 pipelines failed since the trigger was created: ")
	assert.Contains(t, ready.Message, rules.PipelineName("retire", "n1", nodes[1].GetUID())+" (step drain)")
	assert.Contains(t, ready.Message, "kubectl stepwise triggers resume retire")
	assert.Equal(t, int32(2), got.Status.Running, "the running pipelines go on")

	// Resumed: the two failures stay failed but count no more; n4 takes the free place.
	f.clock.Step(time.Minute)
	f.updateTrigger("retire", func(tr *v1alpha1.PipelineTrigger) {
		tr.Spec.Resume = &v1alpha1.TriggerResume{By: "alice", ID: "1"}
	})
	f.sync("retire")
	got = f.trigger("retire")
	assert.Len(t, f.pipelineList(), 5)
	assert.Empty(t, got.Status.Failures)
	assert.Equal(t, int32(2), got.Status.FailureBudgetLeft)
	require.NotNil(t, got.Status.Resumed)
	assert.Equal(t, "alice", got.Status.Resumed.By)
	assert.Equal(t, f.clock.Now().Unix(), got.Status.Resumed.At.Unix(), "when the operator saw it, not what anyone wrote")
	assert.Equal(t, v1alpha1.TriggerReasonActive, readyOf(got).Reason)
	assert.Contains(t, strings.Join(f.events(), "\n"), "Normal Resumed resumed by alice")

	// The budget counts the pipelines started since the resume: n2's, started before,
	// does not count; n4's does, and the same resume seen again is not a new one.
	failPipeline(f, nodes[2], false)
	f.sync("retire")
	assert.Equal(t, int32(2), f.trigger("retire").Status.FailureBudgetLeft)
	failPipeline(f, nodes[4], false)
	f.sync("retire")
	assert.Equal(t, int32(1), f.trigger("retire").Status.FailureBudgetLeft)
}

// TestPauseStartsNothingAndSaysWho: a person's pause holds every start, Ready=False naming
// them, since when the trigger saw it; lifted, the trigger starts again.
func TestPauseStartsNothingAndSaysWho(t *testing.T) {
	n1, n2 := triggertest.Node("n1", 0, retiring), triggertest.Node("n2", time.Second, retiring)
	f := newFixture(t, objs(triggertest.Trigger(), newTemplate("retire-node"), n1, n2))
	f.sync("retire")
	require.Len(t, f.pipelineList(), 1)

	f.updateTrigger("retire", func(tr *v1alpha1.PipelineTrigger) {
		tr.Spec.Pause = &v1alpha1.TriggerPause{By: "alice", Reason: "INC-42"}
	})
	f.finish("retire", n1)
	f.sync("retire")
	pausedAt := f.clock.Now()
	f.clock.Step(time.Minute)
	f.sync("retire")
	got := f.trigger("retire")
	assert.Len(t, f.pipelineList(), 1, "n2 does not start")
	ready := readyOf(got)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, v1alpha1.TriggerReasonPaused, ready.Reason)
	assert.Equal(t, "paused by alice (INC-42): nothing starts; 0 running go on, 1 waiting (kubectl stepwise triggers resume retire)", ready.Message)
	require.NotNil(t, got.Status.Paused)
	assert.Equal(t, pausedAt.Unix(), got.Status.Paused.Since.Unix(), "since the trigger first saw it")
	require.Len(t, got.Status.BlockedBy, 1, "what holds it back, as data")
	blocker := got.Status.BlockedBy[0]
	assert.Equal(t, v1alpha1.BlockerPaused, blocker.Kind)
	assert.Equal(t, "alice", blocker.Name)
	assert.Equal(t, "kubectl stepwise triggers resume retire -n ns", blocker.Unblock)
	require.NotNil(t, blocker.Since)
	assert.Equal(t, pausedAt.Unix(), blocker.Since.Unix(), "since the trigger first saw it, not the last sync")

	f.updateTrigger("retire", func(tr *v1alpha1.PipelineTrigger) { tr.Spec.Pause = nil })
	f.sync("retire")
	f.pipelineFor("retire", n2)
	assert.Nil(t, f.trigger("retire").Status.Paused)
	assert.Empty(t, f.trigger("retire").Status.BlockedBy)
}

// TestCooldownSpacesTheStarts: with a cooldown, one pipeline starts per cooldown however
// much room the concurrency leaves, and the trigger asks to be looked at when it ends.
func TestCooldownSpacesTheStarts(t *testing.T) {
	nodes := []*unstructured.Unstructured{triggertest.Node("a", 0, retiring), triggertest.Node("b", time.Second, retiring), triggertest.Node("c", 2*time.Second, retiring)}
	trig := triggertest.Trigger()
	trig.Spec.Concurrency = 3
	trig.Spec.Cooldown = &metav1.Duration{Duration: 10 * time.Minute}
	f := newFixture(t, objs(trig, newTemplate("retire-node"), nodes[0], nodes[1], nodes[2]))

	requeue := f.sync("retire")
	assert.Len(t, f.pipelineList(), 1, "one start per cooldown")
	assert.LessOrEqual(t, requeue, 10*time.Minute)
	got := f.trigger("retire")
	assert.Equal(t, v1alpha1.TriggerReasonCoolingDown, readyOf(got).Reason)
	assert.Equal(t, f.clock.Now().Unix(), got.Status.LastStart.Unix())

	f.clock.Step(9 * time.Minute)
	f.sync("retire")
	assert.Len(t, f.pipelineList(), 1, "still cooling down")

	f.clock.Step(time.Minute)
	f.sync("retire")
	assert.Len(t, f.pipelineList(), 2, "the cooldown ended: b starts")
}

// TestCooldownCountsFromTheLastFinishToo: a retirement that ends starts the cooldown
// again, so that the capacity it freed settles before the next one takes more.
func TestCooldownCountsFromTheLastFinishToo(t *testing.T) {
	a, b := triggertest.Node("a", 0, retiring), triggertest.Node("b", time.Second, retiring)
	trig := triggertest.Trigger()
	trig.Spec.Cooldown = &metav1.Duration{Duration: 10 * time.Minute}
	f := newFixture(t, objs(trig, newTemplate("retire-node"), a, b))
	f.sync("retire")
	require.Len(t, f.pipelineList(), 1)

	f.clock.Step(30 * time.Minute)
	f.finish("retire", a)
	f.sync("retire")
	assert.Len(t, f.pipelineList(), 1, "a finished just now: b waits out the cooldown")
	got := f.trigger("retire")
	assert.Equal(t, v1alpha1.TriggerReasonCoolingDown, readyOf(got).Reason)
	assert.Equal(t, f.clock.Now().Unix(), got.Status.LastFinish.Unix())

	f.clock.Step(10 * time.Minute)
	f.sync("retire")
	assert.Len(t, f.pipelineList(), 2)
}
