package controller

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// RestingPages calls page with each page of the metadata of the resting pipelines of
// every namespace (status.resting set), until they end or page fails.
type RestingPages func(ctx context.Context, page func([]metav1.PartialObjectMetadata) error) error

// SweepResting wakes the resting pipelines that changed while no watch saw them: the
// operator's cache holds no resting pipeline, and hears of one only when it changes, so
// what was deleted, edited or retried before a start (or across a relist) is found here,
// a page at a time with pause between pages. Waking one clears its status.resting (a
// status write, with its resourceVersion), which brings it whole into the cache, and its
// sync acts. It returns how many it woke.
func (c *Controller) SweepResting(ctx context.Context, pages RestingPages, pause time.Duration) (int, error) {
	woken := 0
	err := pages(ctx, func(items []metav1.PartialObjectMetadata) error {
		for i := range items {
			p := &v1alpha1.Pipeline{ObjectMeta: items[i].ObjectMeta, MetadataOnly: true}
			if restsAsMetadata(p) {
				continue
			}
			if err := c.wake(ctx, p); err != nil {
				return err
			}
			woken++
		}
		if pause <= 0 {
			return ctx.Err()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.clock.After(pause):
			return nil
		}
	})
	if woken > 0 {
		klog.FromContext(ctx).Info("Woke resting pipelines that changed while unwatched", "pipelines", woken)
	}
	return woken, err
}

// wake clears a resting pipeline's status.resting, unless it changed since the page that
// showed it (its watch event then brings it).
func (c *Controller) wake(ctx context.Context, p *v1alpha1.Pipeline) error {
	patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q},"status":{"resting":null}}`, p.ResourceVersion)
	_, err := c.client.StepwiseV1alpha1().Pipelines(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: ControllerName}, "status")
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return fmt.Errorf("wake resting pipeline %s/%s: %w", p.Namespace, p.Name, err)
}
