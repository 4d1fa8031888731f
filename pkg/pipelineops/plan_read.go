package pipelineops

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// Settled tells whether the status answers the latest request: it describes the current
// spec, and no retry is waiting to be picked up. Before that, a Failed phase may be what
// the operator is about to change.
func Settled(p *v1alpha1.Pipeline) bool {
	return !p.RetryRequested() && p.Status.ObservedGeneration == p.Generation
}

// planDone tells whether the operator has answered: the dry run is Planned or Failed for
// its current spec.
func planDone(p *v1alpha1.Pipeline) bool {
	return Settled(p) && (p.Status.Phase == v1alpha1.PipelinePlanned || p.Failed())
}

// planProblem is why a dry run will never be planned: the operator ran it (it predates
// spec.dryRun), or its template does not exist (a pipeline waits for its template).
func planProblem(p *v1alpha1.Pipeline) error {
	for _, s := range p.Status.Steps {
		if s.Ran != nil {
			return fmt.Errorf("the operator ran step %s of dry-run pipeline %s/%s instead of planning it: it predates dry runs (upgrade Stepwise)",
				s.Name, p.Namespace, p.Name)
		}
	}
	if p.Status.Phase == v1alpha1.PipelineSucceeded {
		return fmt.Errorf("the operator ran dry-run pipeline %s/%s instead of planning it: it predates dry runs (upgrade Stepwise)", p.Namespace, p.Name)
	}
	if ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); ready != nil &&
		ready.Reason == v1alpha1.ReasonTemplateNotFound && Settled(p) {
		return fmt.Errorf("dry-run pipeline %s/%s: %s", p.Namespace, p.Name, ready.Message)
	}
	return nil
}

// PlannedStep is a step of a dry run with its status, if it has one yet.
type PlannedStep struct {
	Name, Executor string
	Status         *v1alpha1.StepStatus
}

// PlannedSteps are the steps of a dry run in order: those of its spec, or of its template
// as the operator took it; with no template taken (a failure before), those of the status.
// A step's executor is the one its status names, when it does.
func PlannedSteps(p *v1alpha1.Pipeline) []PlannedStep {
	steps := p.Spec.Steps
	if len(steps) == 0 && p.Status.Template != nil {
		steps = p.Status.Template.Steps
	}
	byName := map[string]*v1alpha1.StepStatus{}
	for i := range p.Status.Steps {
		byName[p.Status.Steps[i].Name] = &p.Status.Steps[i]
	}
	var out []PlannedStep
	for _, s := range steps {
		ps := PlannedStep{Name: s.Name, Executor: s.Executor, Status: byName[s.Name]}
		if ps.Status != nil && ps.Status.Executor != "" {
			ps.Executor = ps.Status.Executor
		}
		out = append(out, ps)
	}
	if len(steps) == 0 {
		for i := range p.Status.Steps {
			s := &p.Status.Steps[i]
			out = append(out, PlannedStep{Name: s.Name, Executor: s.Executor, Status: s})
		}
	}
	return out
}
