package trigger

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

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
		switch rules.OwnershipOf(ts.trig, p, ts.c.operator) {
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

// budgetsBlocking are the PodDisruptionBudgets the current step of a pipeline says it
// waits on (node.drain names those refusing its evictions), sorted by namespace and name,
// each once; none when the pipeline is not blocked on one.
func budgetsBlocking(p *v1alpha1.Pipeline) []v1alpha1.BlockingObject {
	if p.Status.CurrentStep == "" {
		return nil
	}
	var out []v1alpha1.BlockingObject
	for _, s := range p.Status.Steps {
		if s.Name != p.Status.CurrentStep {
			continue
		}
		for _, b := range s.BlockedBy {
			if b.Kind == v1alpha1.KindPodDisruptionBudget && !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	sortObjects(out)
	return out
}

// sortObjects sorts blocking objects by namespace, then name.
func sortObjects(objs []v1alpha1.BlockingObject) {
	slices.SortFunc(objs, func(a, b v1alpha1.BlockingObject) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
}
