package rules

import "github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"

// HoldsEveryStart tells whether a blocker of a trigger's status.blockedBy holds every
// start back: the trigger's own holds, its health gates and its NodeBudget. The others
// hold back what a place frees (Concurrency) or the running pipelines (the object a
// drain waits on, a PodDisruptionBudget), and kubectl stepwise works those out itself.
func HoldsEveryStart(b v1alpha1.Blocker) bool {
	switch b.Kind {
	case v1alpha1.BlockerTemplate, v1alpha1.BlockerPaused, v1alpha1.BlockerFailureBudget, v1alpha1.BlockerGate,
		v1alpha1.BlockerNodeBudget, v1alpha1.BlockerSuspended, v1alpha1.BlockerWindow, v1alpha1.BlockerCoolDown:
		return true
	}
	return false
}
