package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// currentSpec stands for the hash of the spec shape ends with.
const currentSpec = "current"

// shape builds a pipeline of two steps, a and b, that has run its current spec, with its
// finalizer; each option changes one thing of it.
func shape(options ...func(p *v1alpha1.Pipeline)) *v1alpha1.Pipeline {
	p := newPipeline(stepsOf("a", "b")...)
	p.Finalizers = []string{v1alpha1.Finalizer}
	p.Status.SpecHash = currentSpec
	p.Status.Steps = []v1alpha1.StepStatus{{Name: "a", Phase: v1alpha1.StepPending}, {Name: "b", Phase: v1alpha1.StepPending}}
	for _, o := range options {
		o(p)
	}
	if p.Status.SpecHash == currentSpec {
		p.Status.SpecHash = specHash(&p.Spec)
	}
	return p
}

func shRan(step int, phase v1alpha1.StepPhase, hook v1alpha1.Hook) func(*v1alpha1.Pipeline) {
	return func(p *v1alpha1.Pipeline) {
		s := &p.Status.Steps[step]
		s.Phase, s.Hook, s.Ran = phase, hook, &v1alpha1.StepRun{Executor: "test.record"}
	}
}

var (
	shDeleted     = func(p *v1alpha1.Pipeline) { p.DeletionTimestamp = &metav1.Time{} }
	shNoFinalizer = func(p *v1alpha1.Pipeline) { p.Finalizers = nil }
	shOrphan      = func(p *v1alpha1.Pipeline) {
		p.Annotations = map[string]string{v1alpha1.TeardownPolicyAnnotation: v1alpha1.TeardownOrphan}
	}
	shDryRun       = func(p *v1alpha1.Pipeline) { p.Spec.DryRun = true }
	shSuspended    = func(p *v1alpha1.Pipeline) { p.Spec.Suspend = true }
	shEdited       = func(p *v1alpha1.Pipeline) { p.Status.SpecHash = "an earlier spec" }
	shRerun        = func(p *v1alpha1.Pipeline) { p.Spec.UpdatePolicy = v1alpha1.UpdateRerun }
	shNeverRan     = func(p *v1alpha1.Pipeline) { p.Status = v1alpha1.PipelineStatus{} }
	shTeardownPol  = func(p *v1alpha1.Pipeline) { p.Spec.OnFailure = v1alpha1.FailureTeardown }
	shAllSucceeded = func(p *v1alpha1.Pipeline) {
		shRan(0, v1alpha1.StepSucceeded, v1alpha1.HookPostCreate)(p)
		shRan(1, v1alpha1.StepSucceeded, v1alpha1.HookPostCreate)(p)
	}
	shRetired = func(phase v1alpha1.StepPhase) func(*v1alpha1.Pipeline) {
		return func(p *v1alpha1.Pipeline) {
			p.Status.RetiredSteps = []v1alpha1.StepStatus{{Name: "old", Phase: phase, Hook: v1alpha1.HookDelete, Ran: &v1alpha1.StepRun{}}}
		}
	}
	shFailure = func(phase v1alpha1.FailureTeardownPhase) func(*v1alpha1.Pipeline) {
		return func(p *v1alpha1.Pipeline) {
			p.Status.Failure = &v1alpha1.FailureRecord{Step: "b", Message: "boom", Teardown: phase}
		}
	}
)

func TestModeOf(t *testing.T) {
	tests := []struct {
		name string
		p    *v1alpha1.Pipeline
		want syncMode
	}{
		{"a dry run", shape(shDryRun), modePlan},
		{"a deleted dry run", shape(shDryRun, shDeleted), modePlan},
		{"deleted, finalizer gone", shape(shDeleted, shNoFinalizer), modeForget},
		{"deleted, orphan annotation", shape(shDeleted, shOrphan), modeOrphan},
		{"deleted, orphan annotation, finalizer gone", shape(shDeleted, shOrphan, shNoFinalizer), modeForget},
		{"deleted", shape(shDeleted, shRan(0, v1alpha1.StepSucceeded, v1alpha1.HookPostCreate)), modeDelete},
		{"deleted while suspended", shape(shDeleted, shSuspended), modeDelete},
		{"new, no finalizer yet", shape(shNeverRan, shNoFinalizer), modeAddFinalizer},
		{"new", shape(shNeverRan), modeStartRun},
		{"edited before any step ran", shape(shEdited), modeStartRun},
		{"edited after a step ran (Immutable)", shape(shRan(0, v1alpha1.StepSucceeded, v1alpha1.HookPostCreate), shEdited), modeRefuseEdit},
		{"edited after a retired run (Immutable)", shape(shRetired(v1alpha1.StepDeleting), shEdited), modeRefuseEdit},
		{"edited after a step ran (Rerun)", shape(shRan(0, v1alpha1.StepSucceeded, v1alpha1.HookPostCreate), shRerun, shEdited), modeStartRun},
		{"edited after a failure teardown (Rerun)", shape(shTeardownPol, shFailure(v1alpha1.FailureTornDown), shRan(0, v1alpha1.StepDeleted, v1alpha1.HookPostDelete), shRerun, shEdited), modeStartRun},
		{"suspended, not edited", shape(shSuspended), modeSuspended},
		{"suspended with retired runs to tear down", shape(shSuspended, shRetired(v1alpha1.StepDeleting)), modeSuspended},
		{"suspended while tearing down after a failure", shape(shSuspended, shTeardownPol, shFailure(v1alpha1.FailureTearingDown)), modeSuspended},
		{"a retired run to tear down", shape(shRetired(v1alpha1.StepDeleting)), modeTearDownRetired},
		{"a retired run whose teardown is blocked", shape(shRetired(v1alpha1.StepFailed)), modeTearDownRetired},
		{"a retired run torn down", shape(shRetired(v1alpha1.StepDeleted)), modeRun},
		{"running", shape(shRan(0, v1alpha1.StepRunning, v1alpha1.HookCreate)), modeRun},
		{"waiting out a backoff", shape(shRan(0, v1alpha1.StepWaiting, v1alpha1.HookCreate)), modeRun},
		{"failed under Stop", shape(shRan(1, v1alpha1.StepFailed, v1alpha1.HookCreate)), modeFinished},
		{"failed under Teardown, not yet recorded", shape(shTeardownPol, shRan(1, v1alpha1.StepFailed, v1alpha1.HookCreate)), modeTearDownAfterFailure},
		{"failed under the template's Teardown", shape(shRan(1, v1alpha1.StepFailed, v1alpha1.HookCreate), func(p *v1alpha1.Pipeline) {
			p.Status.Template = &v1alpha1.TemplateSnapshot{OnFailure: v1alpha1.FailureTeardown}
		}), modeTearDownAfterFailure},
		{"the pipeline's Stop over the template's Teardown", shape(shRan(1, v1alpha1.StepFailed, v1alpha1.HookCreate), func(p *v1alpha1.Pipeline) {
			p.Spec.OnFailure = v1alpha1.FailureStop
			p.Status.Template = &v1alpha1.TemplateSnapshot{OnFailure: v1alpha1.FailureTeardown}
		}), modeFinished},
		{"tearing down after a failure", shape(shTeardownPol, shFailure(v1alpha1.FailureTearingDown)), modeTearDownAfterFailure},
		{"torn down after a failure", shape(shTeardownPol, shFailure(v1alpha1.FailureTornDown)), modeFinished},
		{"all succeeded", shape(shAllSucceeded), modeFinished},
		{"no steps", shape(func(p *v1alpha1.Pipeline) { p.Status.Steps = nil }), modeFinished},
		{"a policy change alone", shape(shAllSucceeded, shRerun), modeFinished},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, modeOf(tt.p))
		})
	}
}

// TestModeOfEveryShape walks every combination of the things a mode is derived from and
// checks the rules no combination may break.
func TestModeOfEveryShape(t *testing.T) {
	options := []func(*v1alpha1.Pipeline){
		shDeleted, shNoFinalizer, shOrphan, shDryRun, shSuspended, shEdited, shRerun, shTeardownPol,
		shRan(0, v1alpha1.StepSucceeded, v1alpha1.HookPostCreate), shRan(1, v1alpha1.StepFailed, v1alpha1.HookCreate),
		shRetired(v1alpha1.StepDeleting), shFailure(v1alpha1.FailureTearingDown), shFailure(v1alpha1.FailureTornDown),
	}
	const (
		isDeleted = 1 << iota
		hasNoFinalizer
		isOrphan
		isDryRun
		isSuspended
		isEdited
	)
	for set := range 1 << len(options) {
		var chosen []func(*v1alpha1.Pipeline)
		for i, o := range options {
			if set&(1<<i) != 0 {
				chosen = append(chosen, o)
			}
		}
		p := shape(chosen...)
		mode := modeOf(p)
		switch {
		case set&isDryRun != 0:
			assert.Equal(t, modePlan, mode, "shape %b: a dry run only plans", set)
		case set&isDeleted != 0:
			assert.Contains(t, []syncMode{modeForget, modeOrphan, modeDelete}, mode, "shape %b: a deleted pipeline runs nothing", set)
		case set&hasNoFinalizer != 0:
			assert.Equal(t, modeAddFinalizer, mode, "shape %b: nothing runs before the finalizer", set)
		case set&isEdited != 0:
			assert.Contains(t, []syncMode{modeRefuseEdit, modeStartRun}, mode, "shape %b: an edit is refused or starts a run", set)
		case set&isSuspended != 0:
			assert.Equal(t, modeSuspended, mode, "shape %b: a suspended pipeline runs nothing", set)
		default:
			assert.NotContains(t, []syncMode{modePlan, modeForget, modeOrphan, modeDelete, modeAddFinalizer, modeRefuseEdit, modeStartRun, modeSuspended},
				mode, "shape %b", set)
		}
		if set&isOrphan != 0 && set&isDeleted != 0 && set&isDryRun == 0 && set&hasNoFinalizer == 0 {
			assert.Equal(t, modeOrphan, mode, "shape %b: the orphan annotation is honoured", set)
		}
	}
}
