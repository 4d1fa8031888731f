package cli

import (
	"context"
	"errors"
	"slices"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// planTrigger plans the first --max objects a trigger would start.
func (po *planOptions) planTrigger(ctx context.Context) error {
	ns, c, err := po.scope()
	if err != nil {
		return err
	}
	if c.Dynamic == nil || c.Mapper == nil {
		return errors.New("plan --trigger needs a dynamic client and a REST mapper")
	}
	q, err := readTriggerQueue(ctx, c, ns, po.trigger)
	if err != nil {
		return err
	}
	startable := q.startable()
	planned := startable[:min(po.max, len(startable))]
	pipelines := make([]*v1alpha1.Pipeline, len(planned))
	for i, w := range planned {
		// The spec of the pipeline the trigger would make, and none of its names: the
		// trigger would count a dry run with its labels as its own.
		spec := rules.PipelineFor(q.trig, w.obj, w.params).Spec
		pipelines[i] = pipelineops.DryRunOf(&v1alpha1.Pipeline{Spec: spec}, q.trig.Name)
	}
	pl := pipelineops.NewPlanner(c.Stepwise, ns)
	defer po.cleanup(ctx, pl, ns)
	var results []*v1alpha1.Pipeline
	if len(pipelines) > 0 {
		if results, err = pl.Plan(ctx, pipelines, po.timeout); err != nil {
			return err
		}
	}
	if po.output != "" {
		err = po.encode(triggerReportOf(q, planned, results, po.keep))
	} else {
		err = po.printTriggerPlan(q, planned, results)
	}
	if err != nil {
		return err
	}
	if slices.ContainsFunc(results, (*v1alpha1.Pipeline).Failed) {
		return errPipelineFailed
	}
	return nil
}
