package controller

import (
	"slices"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// The retry annotation asks for a failed pipeline, or a blocked teardown, to be tried
// again. Each function below reports whether the annotation is present, so that the caller
// removes it once the status is written; a retry of a pipeline that has not failed changes
// nothing.

// retryTeardown starts the blocked teardowns over.
func (ps *pipelineSync) retryTeardown() bool {
	if !ps.p.RetryRequested() {
		return false
	}
	ps.retryBlockedTeardowns()
	return true
}

// retryBlockedTeardowns starts every blocked teardown over, of steps and retired runs.
func (ps *pipelineSync) retryBlockedTeardowns() {
	for _, steps := range [][]v1alpha1.StepStatus{ps.status.Steps, ps.status.RetiredSteps} {
		for i := range steps {
			if s := &steps[i]; teardownBlocked(s) {
				s.Phase = v1alpha1.StepDeleting
				s.Hook = "" // start the teardown over
				ps.record(retryingTeardown(s))
			}
		}
	}
}

// retryCreation runs the failed step again, or from the step the annotation names when
// that comes before it.
func (ps *pipelineSync) retryCreation() bool {
	value, ok := ps.p.Annotations[v1alpha1.RetryAnnotation]
	if !ok {
		return false
	}
	ps.retryBlockedTeardowns() // of retired runs, which hold the steps back
	if ps.failureTeardown() == v1alpha1.FailureTornDown {
		// Everything that ran was torn down: the pipeline starts over.
		for i := range ps.status.Steps {
			ps.resetStep(&ps.status.Steps[i])
		}
		ps.status.Failure = nil
		ps.status.CompletionTime = nil
		ps.record(retryingFromFirst())
		return true
	}
	failed := ps.failedStep()
	if failed < 0 {
		return true
	}
	from := failed
	if value != "" && value != "true" {
		named := slices.IndexFunc(ps.status.Steps, func(s v1alpha1.StepStatus) bool { return s.Name == value })
		if named < 0 {
			ps.record(retryIgnored(value))
			return true
		}
		// A retry cannot skip the failed step: start at the named step or the failed one.
		from = min(named, failed)
	}
	for i := from; i < len(ps.status.Steps); i++ {
		ps.resetStep(&ps.status.Steps[i])
	}
	ps.status.CompletionTime = nil
	ps.record(retryingFrom(&ps.status.Steps[from]))
	return true
}
