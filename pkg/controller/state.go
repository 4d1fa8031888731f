package controller

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// pipelineSync is the work of one sync on one pipeline: a working copy of its status and the
// Events to record once that status is written.
type pipelineSync struct {
	env    *syncEnv
	p      *v1alpha1.Pipeline // from the cache: never modified
	status *v1alpha1.PipelineStatus
	// steps and params are what the pipeline runs: its spec's, or its template's as it
	// found the template when it started (status.template).
	steps  []v1alpha1.Step
	params map[string]string
	events []event
	// spans are the spans of steps and of the pipeline that ended in this sync, exported
	// once the status that ends them is written.
	spans []func(context.Context)
	// started indexes, by step name, the StepStarted events of this sync in events: a step
	// that starts and succeeds in the same sync gets only its StepSucceeded event, which
	// keeps Events (writes too) down to one a step for instant steps.
	started map[string]int
	// planTarget is the pipeline a dry run plans for (planTarget); nil: itself, or none.
	planTarget *v1alpha1.Pipeline
	// held says why the run cannot start in this sync (its template is missing, or its
	// params do not fit it); nil when it can.
	held *heldRun
	// retryRequested: the sync took the retry annotation, which finish removes once the
	// status that records the retry is written.
	retryRequested bool
	// archiveErr is why the archive did not take the record of a deleted pipeline whose
	// teardown is done, which then waits (ReasonArchivePending).
	archiveErr error
	// ranSpec is the hash of the spec a sync of a pipeline that is not deleted ran
	// (syncRun); empty in the other syncs, which archive nothing as finished.
	ranSpec string
}

// heldRun is why a run cannot start: the phase and Ready condition it shows.
type heldRun struct {
	phase   v1alpha1.PipelinePhase
	reason  string
	message string
}

// hold records that the run cannot start, and why.
func (ps *pipelineSync) hold(phase v1alpha1.PipelinePhase, reason, message string) {
	ps.held = &heldRun{phase: phase, reason: reason, message: message}
}

func (c *Controller) newPipelineSync(p *v1alpha1.Pipeline) *pipelineSync {
	ps := &pipelineSync{env: c.syncEnv, p: p, status: p.Status.DeepCopy(), steps: p.Spec.Steps, params: p.Spec.Params}
	// A sync that does not finish (finish sets it again) wakes a resting pipeline: its
	// status write moves it back among those the operator holds whole.
	ps.status.Resting = ""
	if t := ps.status.Template; p.Spec.TemplateRef != nil && t != nil {
		ps.steps, ps.params = t.Steps, t.Params
	}
	ps.alignSteps()
	ps.recordLegacyFailure()
	return ps
}

func (ps *pipelineSync) now() time.Time { return ps.env.clock.Now() }

func (ps *pipelineSync) timeNow() *metav1.Time {
	t := metav1.NewTime(ps.now())
	return &t
}

// alignSteps gives the status one entry for each step of the spec, in spec order, keeping
// what is known of steps that stay. A step the spec no longer has is retired when it ran:
// its record says how to tear it down.
func (ps *pipelineSync) alignSteps() {
	known := make(map[string]v1alpha1.StepStatus, len(ps.status.Steps))
	for _, s := range ps.status.Steps {
		known[s.Name] = s
	}
	aligned := make([]v1alpha1.StepStatus, len(ps.steps))
	for i, step := range ps.steps {
		s, ok := known[step.Name]
		if !ok {
			s = v1alpha1.StepStatus{Name: step.Name, Phase: v1alpha1.StepPending}
		}
		delete(known, step.Name)
		s.Executor = step.Executor
		aligned[i] = s
	}
	for _, s := range ps.status.Steps {
		// A step without a record (run before records existed) cannot be torn down
		// without its spec: it is forgotten, as it was then.
		if removed, ok := known[s.Name]; ok && removed.Ran != nil && needsTeardown(&removed) {
			ps.retire(&removed)
		}
	}
	ps.status.Steps = aligned
}

// retire keeps a run of a step that the spec no longer has as it ran, for its teardown.
func (ps *pipelineSync) retire(s *v1alpha1.StepStatus) {
	retired := *s.DeepCopy()
	retired.Executor = retired.Ran.Executor
	ps.status.RetiredSteps = append(ps.status.RetiredSteps, retired)
	ps.record(stepRetired(&retired))
}

// needsTeardown tells whether s must be torn down: its Create hook was called (its run
// record says with what) and its teardown has not finished. A step that never got that far
// (an unknown executor, a parameter that did not resolve, a PreCreate that failed) created
// nothing, and its teardown could not start anyway. A step that ran before run records
// existed (an operator upgraded mid-run) has none: it is torn down, from its spec, when
// its status shows it got to Create.
func needsTeardown(s *v1alpha1.StepStatus) bool {
	if s.Phase == v1alpha1.StepDeleted {
		return false
	}
	if s.Ran != nil {
		return true
	}
	return s.StartTime != nil && (s.Phase == v1alpha1.StepSucceeded || s.Hook == v1alpha1.HookCreate ||
		s.Hook == v1alpha1.HookPostCreate || isDeleteHook(s.Hook))
}

// specHash identifies what the steps run with: the spec without suspend and updatePolicy.
func specHash(spec *v1alpha1.PipelineSpec) string {
	unsuspended := *spec
	unsuspended.Suspend = false
	unsuspended.UpdatePolicy = "" // a change of policy alone runs nothing again
	unsuspended.Retention = nil   // nor does a change of how long it is kept
	return hashOf(&unsuspended)
}

// stepHash identifies what one step runs with, its name aside: a renamed step is another
// step, and alignSteps retires the old name.
func stepHash(step *v1alpha1.Step) string {
	unnamed := *step
	unnamed.Name = ""
	return hashOf(&unnamed)
}

func hashOf(v any) string {
	data, err := json.Marshal(v) // maps marshal with sorted keys: the hash is stable
	if err != nil {
		return "" // cannot happen for these types; an empty hash only re-runs the steps
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	return strconv.FormatUint(h.Sum64(), 16)
}

// resetStep makes a step run again from its first hook. Its run record and outputs stay:
// its teardown still runs if the pipeline is deleted, and an executor that updates in
// place (k8s.apply) sees what its last run created.
func (ps *pipelineSync) resetStep(s *v1alpha1.StepStatus) {
	if s.Phase == v1alpha1.StepPending {
		return
	}
	s.Phase, s.Reason = v1alpha1.StepPending, ""
	s.Approval = nil // a run again asks again
	s.Hook = ""
	s.Attempts = 0
	s.HookStartTime = nil
	s.NextAttemptTime = nil
	s.PollInterval = nil
	s.CompletionTime = nil
}

// currentStep is the index of the first step that has not succeeded, or -1.
func (ps *pipelineSync) currentStep() int {
	for i := range ps.status.Steps {
		if ps.status.Steps[i].Phase != v1alpha1.StepSucceeded {
			return i
		}
	}
	return -1
}

// failedStep is the index of a step whose create hooks failed, or -1.
func (ps *pipelineSync) failedStep() int {
	for i := range ps.status.Steps {
		s := &ps.status.Steps[i]
		if s.Phase == v1alpha1.StepFailed && !isDeleteHook(s.Hook) {
			return i
		}
	}
	return -1
}

func (ps *pipelineSync) failed() bool { return ps.failedStep() >= 0 }

// nextTeardown is the step to tear down next, or false when none is left: the steps of
// the spec that ran, last first, then (for a deleted pipeline; a pipeline that runs again
// tears only these down) the retired runs, last first.
func (ps *pipelineSync) nextTeardown(retiredOnly bool) (stepRef, bool) {
	if !retiredOnly {
		for i := len(ps.status.Steps) - 1; i >= 0; i-- {
			if needsTeardown(&ps.status.Steps[i]) {
				return ps.specStep(i), true
			}
		}
	}
	for j := len(ps.status.RetiredSteps) - 1; j >= 0; j-- {
		if needsTeardown(&ps.status.RetiredSteps[j]) {
			return ps.retiredStep(j), true
		}
	}
	return stepRef{}, false
}

// teardownBlocked tells whether a step's teardown failed for good and waits for a retry.
func teardownBlocked(s *v1alpha1.StepStatus) bool {
	return s.Phase == v1alpha1.StepFailed && isDeleteHook(s.Hook)
}

// dropTornDownRetired forgets the retired runs whose teardown finished.
func (ps *pipelineSync) dropTornDownRetired() {
	ps.status.RetiredSteps = slices.DeleteFunc(ps.status.RetiredSteps, func(s v1alpha1.StepStatus) bool {
		return !needsTeardown(&s)
	})
	if len(ps.status.RetiredSteps) == 0 {
		ps.status.RetiredSteps = nil
	}
}
