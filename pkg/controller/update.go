package controller

import (
	"fmt"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// reasonSpecChangeRefused is the Ready reason of a pipeline whose spec changed after its
// steps ran while its updatePolicy is Immutable.
const reasonSpecChangeRefused = "SpecChangeRefused"

// startRun starts the run of a spec the steps have not run for. Every step runs again: a
// step whose executor or parameters changed is retired first (its last run is torn down
// from its record) unless its executor updates in place. A failure of the last run is
// that run's: the new run starts without it. Under Immutable the admission rule refuses
// such an edit; an object that got past it (admitted before the rule existed) is refused
// once a step ran (modeRefuseEdit), and nothing runs: running the new spec could act on
// whatever now has a name.
func (ps *pipelineSync) startRun(hash string) {
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
	ps.status.Failure = nil
	ps.status.StartTime = ps.timeNow()
	ps.status.CompletionTime = nil
}

// refuseEdit records that the new spec (of hash) does not run, with a Warning once per
// edit; summarize says why in the Ready condition.
func (ps *pipelineSync) refuseEdit(hash string) {
	if ps.status.RefusedSpecHash != hash {
		ps.record(specChangeRefused(ps.refusedEditMessage()))
		ps.status.RefusedSpecHash = hash
	}
}

// refusedEditMessage says why an edit does not run, and the ways out.
func (ps *pipelineSync) refusedEditMessage() string {
	return fmt.Sprintf("the spec changed after steps ran, and updatePolicy is %s: nothing runs; "+
		"undo the edit, or run it as a new Pipeline (kubectl stepwise rerun %s)", v1alpha1.UpdateImmutable, ps.p.Name)
}

// updatesInPlace tells whether the named executor re-runs over its last run's work.
func (ps *pipelineSync) updatesInPlace(name string) bool {
	exec, ok := ps.env.executors.Get(name)
	return ok && executor.Describe(exec).UpdatesInPlace
}
