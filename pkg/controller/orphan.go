package controller

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// syncOrphan lets a deleted pipeline go without tearing down its steps, as its annotation
// asks. It says which steps it leaves in a Warning Event and in the log.
func (c *Controller) syncOrphan(ctx context.Context, p *v1alpha1.Pipeline) error {
	ps := c.newPipelineSync(p)
	var left []string
	for r, ok := ps.nextTeardown(false); ok; r, ok = ps.nextTeardown(false) {
		left = append(left, r.s.Name+" ("+r.executorName(deleteDirection)+")")
		r.s.Phase = v1alpha1.StepDeleted // skipped, in this copy only: the object goes away
	}
	if len(left) > 0 {
		ps.record(teardownOrphaned(left))
		klog.FromContext(ctx).Info("Teardown orphaned by annotation", "pipeline", klog.KObj(p), "steps", left)
	}
	if err := ps.archiveGone(ctx, v1alpha1.ArchiveOrphaned); err != nil {
		return err
	}
	ps.emitEvents()
	return c.removeFinalizer(ctx, p)
}
