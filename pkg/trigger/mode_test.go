package trigger

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// holdCase sets one hold on a sync, and says how the trigger names it.
type holdCase struct {
	hold hold
	set  func(ts *triggerSync)
	// reason is Ready's reason; event a part of the Waiting Event ("": none).
	reason, event string
}

func holdCases(now time.Time) []holdCase {
	return []holdCase{
		{holdTemplateMissing, func(ts *triggerSync) { ts.templateMissing = true }, v1alpha1.TriggerReasonTemplateNotFound, ""},
		{holdPaused, func(ts *triggerSync) { ts.brakes.paused = &v1alpha1.TriggerPauseRecord{By: "alice"} },
			v1alpha1.TriggerReasonPaused, "paused by alice"},
		{holdFailureBudgetSpent, func(ts *triggerSync) {
			ts.brakes.failures = make([]v1alpha1.TriggerFailure, rules.FailureBudget(ts.trig))
		}, v1alpha1.TriggerReasonFailureBudgetSpent, "failure budget is spent"},
		{holdGateDeadline, func(ts *triggerSync) { ts.brakes.gateStop = &v1alpha1.TriggerGateStop{Gate: "slo", Message: "burning"} },
			v1alpha1.TriggerReasonGateDeadlineExceeded, "gate slo did not hold past its deadline"},
		{holdNodeBudgetMissing, func(ts *triggerSync) { ts.budgetMissing = true }, v1alpha1.TriggerReasonNodeBudgetNotFound, ""},
		{holdSuspended, func(ts *triggerSync) { ts.trig.Spec.Suspend = true }, v1alpha1.TriggerReasonSuspended, "suspended"},
		{holdOutsideWindow, func(ts *triggerSync) { ts.windowClosed, ts.nextWindow = true, now.Add(time.Hour) },
			v1alpha1.TriggerReasonOutsideWindow, "maintenance window opens"},
		{holdCoolingDown, func(ts *triggerSync) { ts.brakes.coolUntil = now.Add(time.Minute) },
			v1alpha1.TriggerReasonCoolingDown, "cooldown ends"},
		{holdGateClosed, func(ts *triggerSync) {
			ts.gates = gates{checked: true, status: []v1alpha1.TriggerGateStatus{{Name: "slo", Message: "burning"}}}
		}, v1alpha1.TriggerReasonGateClosed, "a health gate does not hold"},
		{holdNodeBudgetFull, func(ts *triggerSync) {
			ts.nodeBudget = &nodeBudget{budget: &v1alpha1.NodeBudget{ObjectMeta: metav1.ObjectMeta{Name: "workers"}}, counted: true, full: true}
		}, v1alpha1.TriggerReasonNodeBudgetFull, "NodeBudget workers is full"},
		{holdConcurrency, func(ts *triggerSync) {
			for range rules.Concurrency(ts.trig) {
				ts.pipelines = append(ts.pipelines, &v1alpha1.Pipeline{})
			}
		}, v1alpha1.TriggerReasonActive, "pipelines of the trigger are unfinished"},
	}
}

// TestHoldIsNamedOnceInOrder: over every combination of holds, the trigger's Ready
// condition, its blockedBy and its Waiting Event name the same hold, the first in order,
// and a trigger that a person must act on is Ready False.
func TestHoldIsNamedOnceInOrder(t *testing.T) {
	now := start
	cases := holdCases(now)
	require.Len(t, cases, len(holds()), "a case for every hold")
	for i, c := range cases {
		require.Equal(t, holds()[i], c.hold, "the cases are in the holds' order")
		if c.hold != holdConcurrency {
			assert.True(t, rules.HoldsEveryStart(v1alpha1.Blocker{Kind: c.hold.blockerKind()}), "kubectl stepwise reads hold %d as holding every start", c.hold)
		}
	}
	assert.False(t, rules.HoldsEveryStart(v1alpha1.Blocker{Kind: holdConcurrency.blockerKind()}), "the plan works the concurrency out itself")

	waiting := &unstructured.Unstructured{}
	waiting.SetName("n1")
	waiting.SetUID(types.UID("n1-uid"))
	for mask := 1; mask < 1<<len(cases); mask++ {
		recorder := record.NewFakeRecorder(10)
		trig := triggertest.Trigger()
		trig.Spec.NodeBudgetRef = &v1alpha1.NodeBudgetRef{Name: "workers"}
		ts := &triggerSync{
			c:    &Controller{clock: testingclock.NewFakeClock(now), recorder: recorder},
			trig: trig, mem: &memory{held: map[hold]bool{}},
			waiting: []*unstructured.Unstructured{waiting}, held: map[hold]bool{},
		}
		var want *holdCase
		var names []string
		for i := range cases {
			if mask&(1<<i) == 0 {
				continue
			}
			cases[i].set(ts)
			names = append(names, cases[i].reason)
			if want == nil {
				want = &cases[i]
			}
		}
		// What holdFor finds object by object, as start records it.
		for _, c := range cases {
			if mask&(1<<int(c.hold-1)) != 0 && c.hold >= holdCoolingDown {
				ts.held[c.hold] = true
			}
		}
		t.Run(strings.Join(names, "+"), func(t *testing.T) {
			if want.hold <= holdCoolingDown {
				assert.Equal(t, want.hold, ts.holdOf(), "the trigger's own hold")
				assert.Equal(t, want.hold, ts.holdFor(context.Background(), waiting, 0), "what holds the object back")
			}
			s := ts.newStatus()
			ready := metav1.Condition{}
			for _, c := range s.Conditions {
				if c.Type == v1alpha1.ConditionReady {
					ready = c
				}
			}
			assert.Equal(t, want.reason, ready.Reason)
			wantStatus := metav1.ConditionTrue
			if want.hold <= holdNodeBudgetMissing {
				wantStatus = metav1.ConditionFalse
			}
			assert.Equal(t, wantStatus, ready.Status)
			require.NotEmpty(t, s.BlockedBy)
			assert.Equal(t, want.hold.blockerKind(), s.BlockedBy[0].Kind)

			ts.reportHeld(want.hold, 1, "n1")
			ts.reportHeld(want.hold, 1, "n1")
			close(recorder.Events)
			var events []string
			for e := range recorder.Events {
				events = append(events, e)
			}
			if want.event == "" {
				assert.Empty(t, events)
				return
			}
			require.Len(t, events, 1, "once while it holds")
			assert.Contains(t, events[0], "Normal "+v1alpha1.TriggerReasonWaiting+" objects wait: ")
			assert.Contains(t, events[0], want.event)
		})
	}
}

// TestSuspendedAndPausedSaysPausedEverywhere: a trigger both suspended and paused was
// reported "suspended" in its Event and "Paused" in its Ready reason; both say paused.
func TestSuspendedAndPausedSaysPausedEverywhere(t *testing.T) {
	trig := triggertest.Trigger()
	trig.Spec.Suspend = true
	trig.Spec.Pause = &v1alpha1.TriggerPause{By: "alice"}
	f := newFixture(t, objs(trig, newTemplate("retire-node"), triggertest.Node("n1", 0, retiring)))
	f.sync("retire")
	assert.Empty(t, f.pipelineList())
	assert.Equal(t, v1alpha1.TriggerReasonPaused, readyOf(f.trigger("retire")).Reason)
	assert.Equal(t, []string{"Normal Waiting objects wait: the trigger is paused by alice; first n1"}, f.events())
	blockers := f.trigger("retire").Status.BlockedBy
	require.Len(t, blockers, 1)
	assert.Equal(t, v1alpha1.BlockerPaused, blockers[0].Kind)
}
