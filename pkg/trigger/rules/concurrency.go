package rules

import (
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// DefaultConcurrency is the concurrency of a trigger whose spec.concurrency is unset (the
// schema's default), or below it (stored before the schema bounded it).
const DefaultConcurrency = 1

// Concurrency is how many of the trigger's pipelines may be unfinished at once:
// spec.concurrency, at least DefaultConcurrency.
func Concurrency(trig *v1alpha1.PipelineTrigger) int {
	return max(int(trig.Spec.Concurrency), DefaultConcurrency)
}

// Unfinished counts the pipelines that hold a place in their trigger's concurrency
// (Pipeline.Finished). Pass the trigger's own pipelines only (OwnershipOf).
func Unfinished(pipelines []*v1alpha1.Pipeline) int {
	n := 0
	for _, p := range pipelines {
		if !p.Finished() {
			n++
		}
	}
	return n
}

// Free is how many more pipelines the trigger may start while unfinished of its pipelines
// are: none once the budget is used up.
func Free(trig *v1alpha1.PipelineTrigger, unfinished int) int {
	return max(Concurrency(trig)-unfinished, 0)
}
