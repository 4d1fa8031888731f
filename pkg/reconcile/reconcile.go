// Package reconcile holds the step of a client-go controller's worker that the engine and
// the trigger controller share: take one key from the queue, sync it, and requeue it as
// the sync's outcome says.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
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

// PanicRecorder counts syncs that panicked; *metrics.Faults is one.
type PanicRecorder interface {
	SyncPanicked(kind string)
}

// ProcessNext takes one key from queue and syncs it with a logger tagged kind=key. A
// success forgets the key's failures and requeues it when the sync asked; a conflict (the
// cache was behind our last write; the watch brings the new version) is requeued quietly;
// any other error is reported and requeued with backoff. A sync that panics is such an
// error: one object's panic (a parser, an executor) fails that object, never the process
// that serves every tenant. panics may be nil. It returns false once the queue is shut
// down.
func ProcessNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[cache.ObjectName], kind string, sync SyncFunc, panics PanicRecorder) bool {
	key, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(key)

	logger := klog.LoggerWithValues(klog.FromContext(ctx), kind, key.String())
	ctx = klog.NewContext(ctx, logger)

	requeueAfter, err := syncRecovering(ctx, key, sync)
	var p *panicError
	if errors.As(err, &p) && panics != nil {
		panics.SyncPanicked(kind)
	}
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

// panicError is a panic of a sync, recovered.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string {
	return fmt.Sprintf("sync panicked: %v\n%s", p.value, p.stack)
}

// syncRecovering runs sync and turns a panic into an error that carries the stack.
func syncRecovering(ctx context.Context, key cache.ObjectName, sync SyncFunc) (requeueAfter time.Duration, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return sync(ctx, key)
}
