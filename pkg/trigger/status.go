package trigger

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/semantic"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// Bounds of the status.
const (
	// maxQueue is how many waiting objects status.queue names.
	maxQueue = 50
	// maxMessage bounds the Ready condition's message, in bytes.
	maxMessage = 1024
)

// newStatus is the trigger's status as this sync found it: its counts, then the readiness
// and the blockers of the hold the status names (statusHold). A trigger that cannot act
// says why, and nothing of the objects: a trigger whose ServiceAccount may not list them
// must not learn, from its status, how many there are or their names.
func (ts *triggerSync) newStatus() v1alpha1.PipelineTriggerStatus {
	trig := ts.trig
	s := trig.Status.DeepCopy()
	s.ObservedGeneration = trig.Generation
	ready := metav1.Condition{
		Type: v1alpha1.ConditionReady, ObservedGeneration: trig.Generation,
		LastTransitionTime: metav1.NewTime(ts.c.clock.Now()).Rfc3339Copy(),
	}
	if ts.problem != nil {
		s.Matched, s.Running, s.Waiting, s.Succeeded, s.Failed, s.AwaitingApproval, s.Queue, s.BlockedBy = 0, 0, 0, 0, 0, 0, nil, nil
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, ts.problem.reason, ts.problem.message
		meta.SetStatusCondition(&s.Conditions, ready)
		setStalled(&s.Conditions, ready)
		return *s
	}

	ts.setCounts(s)
	h := ts.statusHold()
	budgets, blocked := ts.blocked()
	if h != holdNone && h != holdConcurrency {
		blocked = false // the hold is named first
	}
	ready.Status, ready.Reason, ready.Message = ts.readiness(h, s, budgets, blocked)
	blockers := ts.blockers(h, s, budgets, blocked)
	if len(blockers) > v1alpha1.MaxBlockers {
		blockers = blockers[:v1alpha1.MaxBlockers]
	}
	v1alpha1.KeepBlockerSince(blockers, trig.Status.BlockedBy, &metav1.Time{Time: ts.c.clock.Now().UTC().Truncate(time.Second)})
	s.BlockedBy = blockers
	ready.Message = truncate(ready.Message+ts.troubleMessage(), maxMessage)
	meta.SetStatusCondition(&s.Conditions, ready)
	setStalled(&s.Conditions, ready)
	return *s
}

// setCounts sets the status' counts, queue, brakes and gates as this sync found them.
func (ts *triggerSync) setCounts(s *v1alpha1.PipelineTriggerStatus) {
	var running, succeeded, failed, awaitingApproval int32
	for _, p := range ts.pipelines {
		switch {
		case !p.Finished():
			running++
			if len(p.AwaitingApproval()) > 0 {
				awaitingApproval++
			}
		case p.Status.Phase == v1alpha1.PipelineSucceeded:
			succeeded++
		default:
			failed++
		}
	}
	s.Matched, s.Running, s.Succeeded, s.Failed = int32(len(ts.objects)), running, succeeded, failed
	s.AwaitingApproval = awaitingApproval
	s.Waiting = int32(len(ts.waiting))
	s.NextWindow = nil
	if ts.windowClosed {
		s.NextWindow = &metav1.Time{Time: ts.nextWindow}
	}
	s.Queue = nil
	for _, obj := range ts.waiting[:min(len(ts.waiting), maxQueue)] {
		s.Queue = append(s.Queue, ts.objectName(obj))
	}
	s.Failures, s.Paused, s.Resumed, s.LastStart = ts.brakes.failures, ts.brakes.paused, ts.brakes.resumed, ts.brakes.lastStart
	s.LastFinish, s.GateStop = ts.brakes.lastFinish, ts.brakes.gateStop
	s.Gates = ts.gateStatus()
	s.FailureBudgetLeft = max(rules.FailureBudget(ts.trig)-int32(len(ts.brakes.failures)), 0)
}

// readiness is the Ready condition's status, reason and message under hold h, with the
// counts of s; blocked: every running pipeline waits on the PodDisruptionBudgets budgets
// (ts.blocked), which the status names when no other hold does.
func (ts *triggerSync) readiness(h hold, s *v1alpha1.PipelineTriggerStatus, budgets []v1alpha1.BlockingObject, blocked bool) (metav1.ConditionStatus, string, string) {
	trig := ts.trig
	status := metav1.ConditionTrue
	if h.needsPerson() {
		status = metav1.ConditionFalse
	}
	counts := fmt.Sprintf("; %d running, %d waiting", s.Running, s.Waiting)
	switch h {
	case holdTemplateMissing:
		return status, v1alpha1.TriggerReasonTemplateNotFound,
			fmt.Sprintf("PipelineTemplate %s/%s does not exist: nothing starts until it does", trig.Namespace, trig.Spec.TemplateRef.Name)
	case holdPaused:
		message := "paused by " + ts.brakes.paused.By
		if ts.brakes.paused.Reason != "" {
			message += " (" + ts.brakes.paused.Reason + ")"
		}
		return status, v1alpha1.TriggerReasonPaused,
			message + fmt.Sprintf(": nothing starts; %d running go on, %d waiting (kubectl stepwise triggers resume %s)", s.Running, s.Waiting, trig.Name)
	case holdFailureBudgetSpent:
		return status, v1alpha1.TriggerReasonFailureBudgetSpent, ts.failuresMessage()
	case holdGateDeadline:
		stop := ts.brakes.gateStop
		return status, v1alpha1.TriggerReasonGateDeadlineExceeded,
			fmt.Sprintf("gate %s has not held since %s, past its deadline: %s; nothing starts until a person resumes the trigger (kubectl stepwise triggers resume %s)",
				stop.Gate, stop.Since.UTC().Format(time.RFC3339), stop.Message, trig.Name)
	case holdNodeBudgetMissing:
		return status, v1alpha1.TriggerReasonNodeBudgetNotFound,
			fmt.Sprintf("NodeBudget %s does not exist: nothing starts until it does", trig.Spec.NodeBudgetRef.Name)
	case holdSuspended:
		return status, v1alpha1.TriggerReasonSuspended, "suspended: nothing starts" + counts
	case holdOutsideWindow:
		return status, v1alpha1.TriggerReasonOutsideWindow,
			fmt.Sprintf("outside the maintenance window: nothing starts until %s", ts.nextWindow.UTC().Format(time.RFC3339)) + counts
	case holdCoolingDown:
		return status, v1alpha1.TriggerReasonCoolingDown,
			fmt.Sprintf("cooling down: the next start is at %s", ts.brakes.coolUntil.UTC().Format(time.RFC3339)) + counts
	case holdGateClosed:
		return status, v1alpha1.TriggerReasonGateClosed, ts.gatesMessage() + counts
	case holdNodeBudgetFull:
		return status, v1alpha1.TriggerReasonNodeBudgetFull, ts.budgetMessage() + counts
	}
	if blocked {
		message := fmt.Sprintf("%s on %s %s", count(int(s.Running), "running pipeline waits", "running pipelines wait"),
			plural(len(budgets), "PodDisruptionBudget", "PodDisruptionBudgets"), strings.Join(objectNames(budgets), ", "))
		if s.Waiting > 0 {
			message += "; " + count(int(s.Waiting), "object waits", "objects wait")
		}
		return status, v1alpha1.TriggerReasonBlocked, message
	}
	return status, v1alpha1.TriggerReasonActive,
		fmt.Sprintf("%d running (concurrency %d), %d waiting", s.Running, rules.Concurrency(trig), s.Waiting)
}

// blockers are status.blockedBy under hold h: the same state as Ready's reason, as data
// (kubectl stepwise why).
func (ts *triggerSync) blockers(h hold, s *v1alpha1.PipelineTriggerStatus, budgets []v1alpha1.BlockingObject, blocked bool) []v1alpha1.Blocker {
	trig := ts.trig
	resume := fmt.Sprintf("kubectl stepwise triggers resume %s -n %s", trig.Name, trig.Namespace)
	blocker := func(name, unblock string, since *metav1.Time) []v1alpha1.Blocker {
		return []v1alpha1.Blocker{{Kind: h.blockerKind(), Name: name, Unblock: truncate(unblock, 512), Since: since}}
	}
	switch h {
	case holdTemplateMissing:
		return blocker(trig.Spec.TemplateRef.Name, "create the PipelineTemplate "+trig.Namespace+"/"+trig.Spec.TemplateRef.Name, nil)
	case holdPaused:
		return blocker(ts.brakes.paused.By, resume, nil)
	case holdFailureBudgetSpent:
		return blocker("", "a person looks at the failures, then "+resume, nil)
	case holdGateDeadline:
		return blocker(ts.brakes.gateStop.Gate, "the gate holds again, then "+resume, &ts.brakes.gateStop.Since)
	case holdNodeBudgetMissing:
		return blocker(trig.Spec.NodeBudgetRef.Name, "create the NodeBudget "+trig.Spec.NodeBudgetRef.Name, nil)
	case holdSuspended:
		return blocker("", "set spec.suspend to false", nil)
	case holdOutsideWindow:
		return blocker("", "the next maintenance window opens at "+ts.nextWindow.UTC().Format(time.RFC3339), nil)
	case holdCoolingDown:
		return blocker("", "the next start is at "+ts.brakes.coolUntil.UTC().Format(time.RFC3339), nil)
	case holdGateClosed:
		var out []v1alpha1.Blocker
		for _, g := range s.Gates {
			if !g.Holds {
				out = append(out, v1alpha1.Blocker{Kind: h.blockerKind(), Name: g.Name, Unblock: truncate("the gate holds: "+g.Message, 512), Since: &g.Since})
			}
		}
		return out
	case holdNodeBudgetFull:
		return blocker(trig.Spec.NodeBudgetRef.Name, "nodes of the NodeBudget's selector back in service: "+ts.budgetMessage(), nil)
	}
	if blocked {
		out := make([]v1alpha1.Blocker, 0, len(budgets))
		for _, b := range budgets {
			out = append(out, v1alpha1.Blocker{Kind: b.Kind, Namespace: b.Namespace, Name: b.Name,
				Unblock: fmt.Sprintf("the PodDisruptionBudget %s/%s allows a disruption to the pipelines' drains (kubectl get pdb %s -n %s)",
					b.Namespace, b.Name, b.Name, b.Namespace)})
		}
		return out
	}
	if s.Waiting > 0 && int(s.Running) >= rules.Concurrency(trig) {
		// Objects wait for a place, though those this sync looked at may have waited on
		// their params: the concurrency is what a place needs.
		return []v1alpha1.Blocker{{Kind: holdConcurrency.blockerKind(),
			Unblock: truncate(fmt.Sprintf("one of the %d running pipelines finishes (spec.concurrency %d)", s.Running, rules.Concurrency(trig)), 512)}}
	}
	return nil
}

// troubleMessage adds to Ready's message the objects that cannot start, and the taints
// that could not be set.
func (ts *triggerSync) troubleMessage() string {
	var message string
	if len(ts.objectErrors) > 0 {
		first := ts.objectErrors[0]
		what := "cannot start"
		if first.started {
			what = "keeps the params of its pipeline"
		}
		message += fmt.Sprintf("; %s %s: %v", first.object, what, first.err)
		if more := len(ts.objectErrors) - 1; more > 0 {
			message += fmt.Sprintf(" (and %s)", count(more, "more object that cannot start", "more objects that cannot start"))
		}
	}
	if ts.taintErr != nil {
		message += fmt.Sprintf("; waiting nodes are not all tainted as they should be: %v", ts.taintErr)
	}
	return message
}

// setStalled sets Stalled beside Ready, as kstatus reads it (Flux, kpt): a trigger that
// cannot act, or has stopped until a person acts (Ready False: paused, its failure budget
// spent, a gate past its deadline, its template or resource wrong), is Failed; one that
// acts, waiting for its window or its budget included, is Current once its generation is
// observed. Removed, not False, when it does not hold.
func setStalled(conditions *[]metav1.Condition, ready metav1.Condition) {
	if ready.Status == metav1.ConditionTrue {
		meta.RemoveStatusCondition(conditions, v1alpha1.ConditionStalled)
		return
	}
	stalled := ready
	stalled.Type, stalled.Status = v1alpha1.ConditionStalled, metav1.ConditionTrue
	meta.SetStatusCondition(conditions, stalled)
}

// blocked tells whether every running pipeline waits on a PodDisruptionBudget and every
// waiting object waits for them (the budget is full, and none waits on its params), and
// which budgets they wait on.
func (ts *triggerSync) blocked() ([]v1alpha1.BlockingObject, bool) {
	var budgets []v1alpha1.BlockingObject
	running := 0
	for _, p := range ts.pipelines {
		if p.Finished() {
			continue
		}
		running++
		blocking := budgetsBlocking(p)
		if len(blocking) == 0 {
			return nil, false
		}
		for _, b := range blocking {
			if !slices.Contains(budgets, b) {
				budgets = append(budgets, b)
			}
		}
	}
	if running == 0 || len(ts.objectErrors) > 0 || (len(ts.waiting) > 0 && running < rules.Concurrency(ts.trig)) {
		return nil, false
	}
	sortObjects(budgets)
	return budgets, true
}

// objectNames are the objects as namespace/name.
func objectNames(objs []v1alpha1.BlockingObject) []string {
	names := make([]string, len(objs))
	for i, o := range objs {
		names[i] = o.Namespace + "/" + o.Name
	}
	return names
}

// writeStatus writes the status through the status subresource when it changed.
func (c *Controller) writeStatus(ctx context.Context, ts *triggerSync) error {
	if ts.keepStatus {
		return nil
	}
	status := ts.newStatus()
	if semantic.Equal(&ts.trig.Status, &status) {
		return nil
	}
	trig := ts.trig.DeepCopy()
	trig.Status = status
	updated, err := c.client.StepwiseV1alpha1().PipelineTriggers(trig.Namespace).UpdateStatus(ctx, trig,
		metav1.UpdateOptions{FieldManager: ControllerName})
	if apierrors.IsNotFound(err) {
		return nil // deleted during the sync: its deletion queues it, and it is forgotten
	}
	if err != nil {
		return fmt.Errorf("update status of trigger %s: %w", ts.key, err)
	}
	c.triggers.Mutation(updated)
	return nil
}

// count writes n with the singular or plural words.
func count(n int, one, many string) string {
	return fmt.Sprintf("%d %s", n, plural(n, one, many))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// truncate cuts s to at most n bytes, on a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
