package controller

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// A resting pipeline (status.resting) is one the engine has nothing left to do for until
// someone deletes, edits or retries it. The operator lists none (pkg/lenient's Merged
// only watches them, as metadata) and caches one only once it changes, so that its
// restart and its memory follow the pipelines that can still act, not all that ever ran.
// What changed while no watch saw it, SweepResting finds.

// restingPhase is what status.resting says after this sync: the finished phase when the
// pipeline has nothing left to do, else empty. Only a pipeline never edited (generation
// 1) rests: its cached copy then tells an edit by its generation alone, without the
// observedGeneration the metadata leaves out. A retry this sync honours does not keep it
// awake: finish removes the annotation right after. A trigger's pipelines never rest: the
// trigger reads their status (when they finished, which step failed) for its failure
// budget and the NodeBudget, and its historyLimit bounds how many it keeps.
func (ps *pipelineSync) restingPhase() v1alpha1.PipelinePhase {
	p, st := ps.p, ps.status
	if st.Phase != v1alpha1.PipelineSucceeded && st.Phase != v1alpha1.PipelineFailed {
		return ""
	}
	switch {
	case p.Generation != 1, p.Labels[v1alpha1.LabelTrigger] != "", st.ObservedGeneration != p.Generation, p.DeletionTimestamp != nil, p.Spec.DryRun,
		!slices.Contains(p.Finalizers, v1alpha1.Finalizer), p.RetryRequested() && !ps.retryRequested, ps.held != nil,
		ps.ranSpec == "" || st.SpecHash != ps.ranSpec, runModeOf(&p.Spec, st, ps.ranSpec) != modeFinished:
		return ""
	}
	if ps.env.archive != nil {
		withStatus := &v1alpha1.Pipeline{ObjectMeta: p.ObjectMeta, Spec: p.Spec, Status: *st}
		if !archivedAsFinished(withStatus) {
			return "" // archived first: the sync that archives it rests it
		}
		if _, ok := retentionOf(withStatus, ps.env.defaultRetention); ok {
			return "" // its removal is timed from its full status
		}
	}
	return st.Phase
}

// restsAsMetadata tells whether a resting pipeline's cached metadata leaves it nothing to
// do: not deleted, not edited since it rested, our finalizer still on, no retry asked. Any
// of those needs the whole pipeline, read from the API server.
func restsAsMetadata(p *v1alpha1.Pipeline) bool {
	return p.MetadataOnly && p.Generation == 1 && p.DeletionTimestamp == nil &&
		slices.Contains(p.Finalizers, v1alpha1.Finalizer) && !p.RetryRequested()
}

// RestingStandIn is the informer transform of the pipelines a resting stream delivers
// (their metadata alone, status.resting=phase): the cached copy of a resting pipeline that
// changed, which the engine reads whole before it acts (restsAsMetadata).
func RestingStandIn(phase v1alpha1.PipelinePhase) func(obj any) (any, error) {
	return func(obj any) (any, error) {
		p, ok := obj.(*v1alpha1.Pipeline)
		if !ok || p.MetadataOnly {
			return obj, nil
		}
		p.TypeMeta = metav1.TypeMeta{}
		p.Spec = v1alpha1.PipelineSpec{}
		// It rested at generation 1 (restingPhase): a later generation is an edit the
		// copy then tells (Pipeline.Finished, restsAsMetadata).
		p.Status = v1alpha1.PipelineStatus{ObservedGeneration: 1, Phase: phase, Resting: phase}
		p.MetadataOnly = true
		return TrimForCache(p)
	}
}
