package controller

import (
	"slices"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// syncMode is what one sync of a pipeline does. It is derived from the pipeline's typed
// state alone (spec, metadata and status; never a condition's reason or message), and
// each mode has one handler.
type syncMode string

const (
	// modePlan plans each step of a dry run (spec.dryRun) and runs none: syncPlan.
	modePlan syncMode = "Plan"
	// modeForget is a deleted pipeline without our finalizer: nothing is left to do.
	modeForget syncMode = "Forget"
	// modeAddFinalizer puts the finalizer on before anything runs, so that no step
	// escapes teardown.
	modeAddFinalizer syncMode = "AddFinalizer"
	// modeOrphan is a deleted pipeline whose annotation asks to leave what its steps
	// created: syncOrphan.
	modeOrphan syncMode = "Orphan"
	// modeDelete tears down what ran, last first, then lets the pipeline go: syncDeletion.
	modeDelete syncMode = "Delete"
	// modeRetained is a pipeline retention deleted: it goes without a teardown, its
	// removal archived (syncRetained).
	modeRetained syncMode = "Retained"
	// modeRemove is a pipeline whose removal by retention is archived and said in its
	// status, not yet deleted: syncRemove deletes it.
	modeRemove syncMode = "Remove"
	// modeRefuseEdit is a spec changed after steps ran under updatePolicy Immutable:
	// nothing runs, and the status says why (refuseEdit).
	modeRefuseEdit syncMode = "RefuseEdit"
	// modeStartRun is a spec the steps have not run for: it takes the template, retires
	// what changed, and the run goes on in the same sync (startRun).
	modeStartRun syncMode = "StartRun"
	// modeSuspended runs nothing until spec.suspend is false.
	modeSuspended syncMode = "Suspended"
	// modeTearDownRetired tears down the runs the spec no longer has, before the steps
	// run again (tearDownRetired).
	modeTearDownRetired syncMode = "TearDownRetired"
	// modeRun runs the first step that has not succeeded, and the next while each
	// finishes at once (runSteps).
	modeRun syncMode = "Run"
	// modeTearDownAfterFailure tears down what ran after a step failed for good under
	// onFailure Teardown (tearDownAfterFailure).
	modeTearDownAfterFailure syncMode = "TearDownAfterFailure"
	// modeFinished runs nothing: every step succeeded, a step failed under onFailure
	// Stop, or what ran was torn down after a failure. An edit or a retry starts again.
	modeFinished syncMode = "Finished"
)

// modeOf is the mode of a sync of p, as its cache copy has it.
func modeOf(p *v1alpha1.Pipeline) syncMode {
	finalizer := slices.Contains(p.Finalizers, v1alpha1.Finalizer)
	switch {
	case p.Spec.DryRun:
		return modePlan
	case p.DeletionTimestamp != nil && !finalizer:
		return modeForget
	case p.DeletionTimestamp != nil && removedByRetention(p):
		return modeRetained
	case p.DeletionTimestamp != nil && p.Annotations[v1alpha1.TeardownPolicyAnnotation] == v1alpha1.TeardownOrphan:
		return modeOrphan
	case p.DeletionTimestamp != nil:
		return modeDelete
	case removedByRetention(p):
		return modeRemove
	case !finalizer:
		return modeAddFinalizer
	}
	return runModeOf(&p.Spec, &p.Status, cachedSpecHash(p))
}

// cachedSpecHash is the hash of p's spec, whole or as the cache left it (elideValues).
func cachedSpecHash(p *v1alpha1.Pipeline) string {
	if p.Elided != nil {
		return p.Elided.SpecHash
	}
	return specHash(&p.Spec)
}

// runModeOf is the mode of a pipeline that is not deleted, with spec (of hash spec) and
// status; a sync derives it again from its working status after each handler, so that one
// sync goes on from retired teardowns to the steps, and from a failure to its teardown.
func runModeOf(spec *v1alpha1.PipelineSpec, st *v1alpha1.PipelineStatus, hash string) syncMode {
	failed := slices.ContainsFunc(st.Steps, func(s v1alpha1.StepStatus) bool {
		return s.Phase == v1alpha1.StepFailed && !isDeleteHook(s.Hook)
	})
	switch {
	case hash != st.SpecHash && refusesEdit(spec, st):
		return modeRefuseEdit
	case hash != st.SpecHash:
		return modeStartRun
	case spec.Suspend:
		return modeSuspended
	case slices.ContainsFunc(st.RetiredSteps, func(s v1alpha1.StepStatus) bool { return needsTeardown(&s) }):
		return modeTearDownRetired
	case st.Failure != nil && st.Failure.Teardown == v1alpha1.FailureTearingDown:
		return modeTearDownAfterFailure
	case st.Failure != nil:
		return modeFinished
	case failed && onFailure(spec, st) == v1alpha1.FailureTeardown:
		return modeTearDownAfterFailure
	case failed || !slices.ContainsFunc(st.Steps, func(s v1alpha1.StepStatus) bool { return s.Phase != v1alpha1.StepSucceeded }):
		return modeFinished
	default:
		return modeRun
	}
}

// refusesEdit tells whether a new spec must not run: under Immutable, once a step's Create
// hook was called (its run record says so).
func refusesEdit(spec *v1alpha1.PipelineSpec, st *v1alpha1.PipelineStatus) bool {
	if st.SpecHash == "" || spec.UpdatePolicy == v1alpha1.UpdateRerun {
		return false
	}
	return len(st.RetiredSteps) > 0 || slices.ContainsFunc(st.Steps, func(s v1alpha1.StepStatus) bool { return s.Ran != nil })
}

// onFailure is the pipeline's failure policy: its own, else its template's, else Stop.
func onFailure(spec *v1alpha1.PipelineSpec, st *v1alpha1.PipelineStatus) v1alpha1.FailurePolicy {
	if spec.OnFailure != "" {
		return spec.OnFailure
	}
	if t := st.Template; t != nil && t.OnFailure != "" {
		return t.OnFailure
	}
	return v1alpha1.FailureStop
}
