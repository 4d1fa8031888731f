package trigger

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// brakes are what hold a trigger's starts back besides its concurrency: a person's pause,
// a spent failure budget, and the cooldown since its last start. The pipelines running go
// on under every one of them.
type brakes struct {
	// failures are the failed pipelines the budget counts, since resumed (or ever).
	failures []v1alpha1.TriggerFailure
	resumed  *v1alpha1.TriggerResumeRecord
	paused   *v1alpha1.TriggerPauseRecord
	// gateStop is the gate that did not hold past its deadline, until a resume.
	gateStop *v1alpha1.TriggerGateStop
	// lastStart is when the trigger last started a pipeline, lastFinish when one of its
	// pipelines last finished; coolUntil, when set, is when the cooldown since the later
	// of the two ends.
	lastStart, lastFinish *metav1.Time
	coolUntil             time.Time
}

// applyBrakes reads the trigger's pause, resume and cooldown, and counts the failed
// pipelines its failure budget has not counted yet, each with a Warning. It returns how
// soon to look again for the cooldown to end (0: no cooldown pending).
func (ts *triggerSync) applyBrakes(now time.Time) time.Duration {
	trig := ts.trig
	b := &ts.brakes
	b.failures, b.resumed, b.lastStart = slices.Clone(trig.Status.Failures), trig.Status.Resumed, trig.Status.LastStart
	b.gateStop = trig.Status.GateStop
	if r := trig.Spec.Resume; r != nil && (b.resumed == nil || b.resumed.ID != r.ID || b.resumed.By != r.By) {
		// A new resume: the failures count from now, the operator's clock, and a gate's
		// deadline from now too.
		b.resumed = &v1alpha1.TriggerResumeRecord{By: r.By, ID: r.ID, At: metav1.NewTime(now).Rfc3339Copy()}
		b.failures, b.gateStop = nil, nil
		ts.event(corev1.EventTypeNormal, v1alpha1.TriggerReasonResumed, "resumed by %s; the failure budget counts from zero", r.By)
	}
	ts.countFailures()

	if p := trig.Spec.Pause; p != nil {
		since := metav1.NewTime(now).Rfc3339Copy()
		if old := trig.Status.Paused; old != nil && old.By == p.By && old.Reason == p.Reason {
			since = old.Since
		}
		b.paused = &v1alpha1.TriggerPauseRecord{By: p.By, Reason: p.Reason, Since: since}
	}

	b.lastFinish = trig.Status.LastFinish
	for _, p := range ts.pipelines {
		if at := rules.FinishedAt(p); !at.IsZero() && (b.lastFinish == nil || at.After(b.lastFinish.Time)) {
			t := metav1.NewTime(at).Rfc3339Copy()
			b.lastFinish = &t
		}
	}
	if cooldown := trig.Spec.Cooldown; cooldown != nil && cooldown.Duration > 0 {
		last := b.lastStart
		if b.lastFinish != nil && (last == nil || b.lastFinish.After(last.Time)) {
			last = b.lastFinish
		}
		if last == nil {
			return 0
		}
		if until := last.Add(cooldown.Duration); now.Before(until) {
			b.coolUntil = until
			return until.Sub(now)
		}
	}
	return 0
}

// countFailures adds each failed pipeline of the trigger the budget has not counted, that
// started since the last resume, up to the budget.
func (ts *triggerSync) countFailures() {
	b := &ts.brakes
	for _, p := range ts.pipelines {
		if len(b.failures) >= int(rules.FailureBudget(ts.trig)) {
			return
		}
		if !rules.CountsAgainstBudget(ts.trig, p) ||
			slices.ContainsFunc(b.failures, func(f v1alpha1.TriggerFailure) bool { return f.UID == string(p.UID) }) {
			continue
		}
		at := rules.FailedAt(p)
		f := v1alpha1.TriggerFailure{Pipeline: p.Name, UID: string(p.UID), Object: p.Annotations[v1alpha1.AnnotationObject],
			Step: p.Status.CurrentStep, At: metav1.NewTime(at).Rfc3339Copy()}
		b.failures = append(b.failures, f)
		ts.event(corev1.EventTypeWarning, v1alpha1.TriggerReasonPipelineFailed, "pipeline %s of %s failed at step %s: %d of the failure budget of %d spent",
			f.Pipeline, f.Object, f.Step, len(b.failures), rules.FailureBudget(ts.trig))
	}
}

// budgetSpent tells whether as many pipelines failed as the failure budget allows.
func (ts *triggerSync) budgetSpent() bool {
	return len(ts.brakes.failures) >= int(rules.FailureBudget(ts.trig))
}

// coolingDown tells whether the cooldown since the last start holds the next start back.
func (ts *triggerSync) coolingDown() bool { return !ts.brakes.coolUntil.IsZero() }

// started records a start: with a cooldown, the next waits for it.
func (ts *triggerSync) started(now time.Time) {
	t := metav1.NewTime(now).Rfc3339Copy()
	ts.brakes.lastStart = &t
	if cooldown := ts.trig.Spec.Cooldown; cooldown != nil && cooldown.Duration > 0 {
		ts.brakes.coolUntil = now.Add(cooldown.Duration)
	}
}

// failuresMessage names the failures the budget counted.
func (ts *triggerSync) failuresMessage() string {
	names := make([]string, 0, len(ts.brakes.failures))
	for _, f := range ts.brakes.failures {
		name := f.Pipeline
		if f.Step != "" {
			name += " (step " + f.Step + ")"
		}
		names = append(names, name)
	}
	return fmt.Sprintf("%s failed since %s: %s; nothing new starts until a person resumes the trigger (kubectl stepwise triggers resume %s)",
		count(len(names), "pipeline", "pipelines"), ts.sinceWhat(), strings.Join(names, ", "), ts.trig.Name)
}

// sinceWhat says from when the failures count.
func (ts *triggerSync) sinceWhat() string {
	if r := ts.brakes.resumed; r != nil {
		return "it was resumed by " + r.By + " at " + r.At.UTC().Format(time.RFC3339)
	}
	return "the trigger was created"
}
