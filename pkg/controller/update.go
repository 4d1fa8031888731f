package controller

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// reasonSpecChangeRefused is the Ready reason of a pipeline whose spec changed after its
// steps ran while its updatePolicy is Immutable.
const reasonSpecChangeRefused = "SpecChangeRefused"

// newSpec starts the run of a spec the steps have not run for. Every step runs again: a
// step whose executor or parameters changed is retired first (its last run is torn down
// from its record) unless its executor updates in place. Under Immutable the admission
// rule refuses such an edit; an object that got past it (admitted before the rule
// existed) is refused by refusesEdit once a step ran, and nothing runs: running the new
// spec could act on whatever now has a name.
func (ps *pipelineSync) newSpec(hash string) {
	for i := range ps.status.Steps {
		s, step := &ps.status.Steps[i], &ps.steps[i]
		if s.Ran != nil && s.Ran.StepHash != stepHash(step) && !ps.updatesInPlace(s.Ran.Executor) {
			ps.retire(s)
			*s = v1alpha1.StepStatus{Name: step.Name, Executor: step.Executor, Phase: v1alpha1.StepPending}
			continue
		}
		ps.resetStep(s)
	}
	ps.status.SpecHash = hash
	ps.status.StartTime = ps.timeNow()
	ps.status.CompletionTime = nil
}

// refusesEdit tells whether a new spec must not run: under Immutable, once a step ran.
func (ps *pipelineSync) refusesEdit() bool {
	return ps.status.SpecHash != "" && ps.p.Spec.UpdatePolicy != v1alpha1.UpdateRerun && ps.anyRan()
}

// refuseSpecChange says, on the pipeline, why its new spec (of hash) does not run: in
// its status, and in a Warning once per edit.
func (ps *pipelineSync) refuseSpecChange(hash string) {
	msg := fmt.Sprintf("the spec changed after steps ran, and updatePolicy is %s: nothing runs; "+
		"undo the edit, or run it as a new Pipeline (kubectl stepwise rerun %s)", v1alpha1.UpdateImmutable, ps.p.Name)
	if ps.status.RefusedSpecHash != hash {
		ps.warningEvent(reasonSpecChangeRefused, "%s", msg)
		ps.status.RefusedSpecHash = hash
	}
	ps.status.Phase = v1alpha1.PipelineFailed
	ps.setReady(metav1.ConditionFalse, reasonSpecChangeRefused, msg)
}

// anyRan tells whether a step's Create hook was called.
func (ps *pipelineSync) anyRan() bool {
	for i := range ps.status.Steps {
		if ps.status.Steps[i].Ran != nil {
			return true
		}
	}
	return len(ps.status.RetiredSteps) > 0
}

// updatesInPlace tells whether the named executor re-runs over its last run's work.
func (ps *pipelineSync) updatesInPlace(name string) bool {
	exec, ok := ps.c.executors.Get(name)
	return ok && executor.Describe(exec).UpdatesInPlace
}
