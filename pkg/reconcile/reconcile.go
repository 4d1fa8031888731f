// Package reconcile holds the step of a client-go controller's worker that the engine and
// the trigger controller share: take one key from the queue, sync it, and requeue it as
// the sync's outcome says.
package reconcile

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// SyncFunc syncs the object of one key and returns when to look at it again (0: not
// unless something changes).
type SyncFunc func(ctx context.Context, key cache.ObjectName) (time.Duration, error)

// ProcessNext takes one key from queue and syncs it with a logger tagged kind=key. A
// success forgets the key's failures and requeues it when the sync asked; a conflict (the
// cache was behind our last write; the watch brings the new version) is requeued quietly;
// any other error is reported and requeued with backoff. It returns false once the queue
// is shut down.
func ProcessNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[cache.ObjectName], kind string, sync SyncFunc) bool {
	key, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(key)

	logger := klog.LoggerWithValues(klog.FromContext(ctx), kind, key.String())
	ctx = klog.NewContext(ctx, logger)

	requeueAfter, err := sync(ctx, key)
	switch {
	case err == nil:
		queue.Forget(key)
		if requeueAfter > 0 {
			queue.AddAfter(key, requeueAfter)
		}
	case apierrors.IsConflict(err):
		logger.V(4).Info("Conflict writing, requeued", "err", err)
		queue.AddRateLimited(key)
	default:
		utilruntime.HandleErrorWithContext(ctx, err, "Syncing "+kind+" failed", kind, key.String())
		queue.AddRateLimited(key)
	}
	return true
}
