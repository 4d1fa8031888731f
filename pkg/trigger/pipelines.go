package trigger

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// reasonTornDownAfterFailure is the reason of the Ready condition the engine
// (pkg/controller) gives a pipeline with onFailure: Teardown once it has torn down the
// steps that ran after a step failed for good. Such a pipeline is finished: it leaves
// nothing half done, so it no longer holds a place in its trigger's budget. The engine and
// the trigger agree on this string.
const reasonTornDownAfterFailure = v1alpha1.ReasonTornDownAfterFailure

// collectPipelines finds the trigger's pipelines in the cache, with the ones our writes
// made that the informer has not delivered yet: those LabelTrigger names the trigger by
// that OwnershipOf says are its own. It adopts those an earlier version made for it.
func (ts *triggerSync) collectPipelines(ctx context.Context) error {
	items, err := ts.c.pipelines.ByIndex(pipelineTriggerIndex, ts.trig.Namespace+"/"+LabelValueOf(ts.trig.Name))
	if err != nil {
		return fmt.Errorf("list the pipelines of trigger %s from cache: %w", ts.key, err)
	}
	for _, item := range items {
		p, ok := item.(*v1alpha1.Pipeline)
		if !ok {
			continue
		}
		switch OwnershipOf(ts.trig, p) {
		case Owned:
			ts.pipelines = append(ts.pipelines, p)
		case Adoptable:
			adopted, err := ts.adopt(ctx, p)
			if err != nil {
				return err
			}
			if adopted != nil {
				ts.pipelines = append(ts.pipelines, adopted)
			}
		case NotOwned:
		}
	}
	slices.SortFunc(ts.pipelines, func(a, b *v1alpha1.Pipeline) int { return cmp.Compare(a.Name, b.Name) })
	for _, p := range ts.pipelines {
		uid := types.UID(p.Labels[LabelObjectUID])
		if _, dup := ts.byObject[uid]; !dup {
			ts.byObject[uid] = p
		}
	}
	return nil
}

// finished tells whether a pipeline no longer counts against its trigger's concurrency:
// it succeeded, or it failed and was torn down after its failure. Any other pipeline is
// unfinished: pending, running, suspended, failed and stopped (its object is left half
// done, as a failed drain leaves a node cordoned, until someone retries or deletes it),
// one whose spec changed since the engine last looked at it, and one being deleted (its
// teardown is work too) until it is gone.
func Finished(p *v1alpha1.Pipeline) bool {
	if p.DeletionTimestamp != nil || p.Status.ObservedGeneration < p.Generation {
		return false
	}
	switch p.Status.Phase {
	case v1alpha1.PipelineSucceeded:
		return true
	case v1alpha1.PipelineFailed:
		ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		return ready != nil && ready.Reason == reasonTornDownAfterFailure
	}
	return false
}

// budgetPattern finds the PodDisruptionBudgets a message names: the API server refuses an
// eviction with "The disruption budget NAME needs N healthy pods and has M currently",
// which node.drain puts in its step's message for every blocked pod.
var budgetPattern = regexp.MustCompile(`(?i)disruption ?budget\s+"?([a-z0-9](?:[-a-z0-9.]*[a-z0-9])?)`)

// budgetsBlocking are the PodDisruptionBudgets that the message of a pipeline's current
// step names, sorted, each once; none when the pipeline is not blocked on one.
func budgetsBlocking(p *v1alpha1.Pipeline) []string {
	if p.Status.CurrentStep == "" {
		return nil
	}
	var out []string
	for _, s := range p.Status.Steps {
		if s.Name != p.Status.CurrentStep {
			continue
		}
		for _, m := range budgetPattern.FindAllStringSubmatch(s.Message, -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	slices.Sort(out)
	return out
}
