package main

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/controller"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	"github.com/stepwise-dev/stepwise/pkg/lenient"
)

const (
	// restingSweepPage and restingSweepPause pace a sweep of the resting pipelines: 20
	// every 5 ms reads 100,000 in 25 s and more, spread so that the API server serves the
	// pipelines that act meanwhile. A page is small because a tenant's metadata can be
	// large (256 KiB of annotations a pipeline): a page of 500 grew the live heap of an
	// operator with a tenant's largest pipelines past its bound (hostile/largest).
	restingSweepPage  = 20
	restingSweepPause = 5 * time.Millisecond
	// restingSweepRetry is how long a sweep that failed waits before it starts again.
	restingSweepRetry = 10 * time.Second
)

// sweepResting runs controller.SweepResting after each list of pipelines (a value on
// sweeps), once the pipelines' cache has synced, until ctx ends.
func sweepResting(ctx context.Context, c *controller.Controller, client versioned.Interface, sweeps <-chan struct{}, synced cache.InformerSynced) {
	logger := klog.FromContext(ctx)
	pages := func(ctx context.Context, page func([]metav1.PartialObjectMetadata) error) error {
		return lenient.MetadataPages(ctx, client.StepwiseV1alpha1().RESTClient(), "pipelines", v1alpha1.FieldResting+"!=",
			restingSweepPage, page)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweeps:
		}
		if !cache.WaitForCacheSync(ctx.Done(), synced) {
			return
		}
		for {
			_, err := c.SweepResting(ctx, pages, restingSweepPause)
			if err == nil || ctx.Err() != nil {
				break
			}
			logger.Error(err, "Sweep of the resting pipelines failed; starting it again", "after", restingSweepRetry)
			select {
			case <-ctx.Done():
				return
			case <-time.After(restingSweepRetry):
			}
		}
	}
}
