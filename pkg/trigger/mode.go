package trigger

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// hold is what keeps a trigger from starting a pipeline. The constants are in the one order
// the trigger asks them: when several hold, the first is the one its Ready condition, its
// status.blockedBy and its Waiting Event name. Holds up to holdNodeBudgetMissing need a
// person, and make the trigger Ready False; the others pass by themselves.
type hold int

const (
	holdNone hold = iota
	// holdTemplateMissing: spec.templateRef names no PipelineTemplate.
	holdTemplateMissing
	// holdPaused: a person paused the trigger (spec.pause).
	holdPaused
	// holdFailureBudgetSpent: as many pipelines failed as spec.failureBudget allows.
	holdFailureBudgetSpent
	// holdGateDeadline: a health gate did not hold past its deadline.
	holdGateDeadline
	// holdNodeBudgetMissing: spec.nodeBudgetRef names no NodeBudget.
	holdNodeBudgetMissing
	// holdSuspended: spec.suspend.
	holdSuspended
	// holdOutsideWindow: the maintenance window is closed.
	holdOutsideWindow
	// holdCoolingDown: spec.cooldown since the last start or finish has not passed.
	holdCoolingDown

	// The holds below are found while starting, object by object: they hold an object
	// back when the trigger's own do not. holdFor asks the concurrency first, as it costs
	// nothing; the status names a gate or the budget before it, as they held back an
	// object the concurrency did not.

	// holdGateClosed: a health gate does not hold.
	holdGateClosed
	// holdNodeBudgetFull: the NodeBudget has no room for the node.
	holdNodeBudgetFull
	// holdConcurrency: spec.concurrency of the trigger's pipelines are unfinished.
	holdConcurrency
)

// holds are every hold, in order.
func holds() []hold {
	hs := make([]hold, 0, holdConcurrency)
	for h := holdTemplateMissing; h <= holdConcurrency; h++ {
		hs = append(hs, h)
	}
	return hs
}

// needsPerson tells whether the hold lasts until a person acts: the trigger is Ready False.
func (h hold) needsPerson() bool { return h != holdNone && h <= holdNodeBudgetMissing }

// holdOf is the trigger's own hold in this sync: what holds every object back, whatever
// it is. It is derived from the sync's typed state alone, and asked again before each
// start, as a start begins a cooldown and a gate's check may find it past its deadline.
func (ts *triggerSync) holdOf() hold {
	switch {
	case ts.templateMissing:
		return holdTemplateMissing
	case ts.brakes.paused != nil:
		return holdPaused
	case ts.budgetSpent():
		return holdFailureBudgetSpent
	case ts.brakes.gateStop != nil:
		return holdGateDeadline
	case ts.budgetMissing:
		return holdNodeBudgetMissing
	case ts.trig.Spec.Suspend:
		return holdSuspended
	case ts.windowClosed:
		return holdOutsideWindow
	case ts.coolingDown():
		return holdCoolingDown
	}
	return holdNone
}

// holdFor is what holds the object back now, with unfinished of the trigger's pipelines
// unfinished: the trigger's own hold, else its concurrency, its health gates (checked the
// first time), its NodeBudget (counted the first time, under the budget's lock).
func (ts *triggerSync) holdFor(ctx context.Context, obj *unstructured.Unstructured, unfinished int) hold {
	if h := ts.holdOf(); h != holdNone {
		return h
	}
	switch {
	case rules.Free(ts.trig, unfinished) == 0:
		return holdConcurrency
	case !ts.gatesOpen(ctx):
		return holdGateClosed
	case !ts.budgetAllows(obj):
		return holdNodeBudgetFull
	}
	return holdNone
}

// statusHold is the hold the status names: the trigger's own, or else the first that held
// an object back in this sync. A cooldown is named only while it holds objects back.
func (ts *triggerSync) statusHold() hold {
	if h := ts.holdOf(); h != holdNone && h != holdCoolingDown {
		return h
	}
	for _, h := range holds() {
		if ts.held[h] {
			return h
		}
	}
	return holdNone
}

// recordHeld records the Waiting Event of objects held back by h, the first of them first;
// none for a hold whose absence the status alone says (a missing template or budget).
func (ts *triggerSync) recordHeld(h hold, unfinished int, first string) {
	switch h {
	case holdSuspended:
		ts.waitingEvent("objects wait: the trigger is suspended; first %s", first)
	case holdOutsideWindow:
		ts.waitingEvent("objects wait: the maintenance window opens at %s; first %s", ts.nextWindow.UTC().Format(time.RFC3339), first)
	case holdPaused:
		ts.waitingEvent("objects wait: the trigger is paused by %s; first %s", ts.brakes.paused.By, first)
	case holdFailureBudgetSpent:
		ts.waitingEvent("objects wait: the trigger's failure budget is spent; first %s", first)
	case holdGateDeadline:
		ts.waitingEvent("objects wait: gate %s did not hold past its deadline; first %s", ts.brakes.gateStop.Gate, first)
	case holdCoolingDown:
		ts.waitingEvent("objects wait: the cooldown ends at %s; first %s", ts.brakes.coolUntil.UTC().Format(time.RFC3339), first)
	case holdConcurrency:
		ts.waitingEvent("objects wait: %d pipelines of the trigger are unfinished (concurrency %d); first %s", unfinished, rules.Concurrency(ts.trig), first)
	case holdGateClosed:
		ts.waitingEvent("objects wait: a health gate does not hold; first %s", first)
	case holdNodeBudgetFull:
		ts.waitingEvent("objects wait: NodeBudget %s is full; first %s", ts.nodeBudget.budget.Name, first)
	}
}

// blockerKind is the kind of Blocker (v1alpha1.Blocker*) that names the hold in the status.
func (h hold) blockerKind() string {
	switch h {
	case holdTemplateMissing:
		return v1alpha1.BlockerTemplate
	case holdPaused:
		return v1alpha1.BlockerPaused
	case holdFailureBudgetSpent:
		return v1alpha1.BlockerFailureBudget
	case holdGateDeadline, holdGateClosed:
		return v1alpha1.BlockerGate
	case holdNodeBudgetMissing, holdNodeBudgetFull:
		return v1alpha1.BlockerNodeBudget
	case holdSuspended:
		return v1alpha1.BlockerSuspended
	case holdOutsideWindow:
		return v1alpha1.BlockerWindow
	case holdCoolingDown:
		return v1alpha1.BlockerCoolDown
	case holdConcurrency:
		return v1alpha1.BlockerConcurrency
	}
	return ""
}
