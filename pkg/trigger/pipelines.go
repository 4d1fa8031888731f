package trigger

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// collectPipelines finds the trigger's pipelines in the cache, with the ones our writes
// made that the informer has not delivered yet: those LabelTrigger names the trigger by
// that rules.OwnershipOf says are its own. It adopts those an earlier version made for it.
func (ts *triggerSync) collectPipelines(ctx context.Context) error {
	items, err := ts.c.pipelines.ByIndex(pipelineTriggerIndex, ts.trig.Namespace+"/"+rules.LabelValueOf(ts.trig.Name))
	if err != nil {
		return fmt.Errorf("list the pipelines of trigger %s from cache: %w", ts.key, err)
	}
	for _, item := range items {
		p, ok := item.(*v1alpha1.Pipeline)
		if !ok {
			continue
		}
		switch rules.OwnershipOf(ts.trig, p) {
		case rules.Owned:
			ts.pipelines = append(ts.pipelines, p)
		case rules.Adoptable:
			adopted, err := ts.adopt(ctx, p)
			if err != nil {
				return err
			}
			if adopted != nil {
				ts.pipelines = append(ts.pipelines, adopted)
			}
		case rules.NotOwned:
		}
	}
	slices.SortFunc(ts.pipelines, func(a, b *v1alpha1.Pipeline) int { return cmp.Compare(a.Name, b.Name) })
	ts.byObject = rules.ByObject(ts.pipelines)
	return nil
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
