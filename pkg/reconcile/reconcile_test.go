package reconcile

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"
)

func TestProcessNext(t *testing.T) {
	key := cache.ObjectName{Namespace: "ns", Name: "p"}
	tests := []struct {
		name         string
		requeue      time.Duration
		err          error
		wantFailures int
	}{
		{name: "done"},
		{name: "done, look again later", requeue: time.Hour},
		{name: "conflict: requeued with backoff", err: apierrors.NewConflict(schema.GroupResource{Resource: "pipelines"}, "p", errors.New("stale")), wantFailures: 1},
		{name: "error: requeued with backoff", err: errors.New("boom"), wantFailures: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](time.Hour, time.Hour))
			defer q.ShutDown()
			q.Add(key)
			var synced []cache.ObjectName
			assert.True(t, ProcessNext(ctx, q, "pipeline", func(_ context.Context, k cache.ObjectName) (time.Duration, error) {
				synced = append(synced, k)
				return tt.requeue, tt.err
			}))
			assert.Equal(t, []cache.ObjectName{key}, synced)
			assert.Equal(t, tt.wantFailures, q.NumRequeues(key))
			assert.Zero(t, q.Len(), "nothing ready now: a requeue waits")
		})
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]())
	q.ShutDown()
	assert.False(t, ProcessNext(context.Background(), q, "pipeline", nil), "a shut-down queue ends the worker")
}
