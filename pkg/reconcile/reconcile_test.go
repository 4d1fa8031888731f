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
			}, nil))
			assert.Equal(t, []cache.ObjectName{key}, synced)
			assert.Equal(t, tt.wantFailures, q.NumRequeues(key))
			assert.Zero(t, q.Len(), "nothing ready now: a requeue waits")
		})
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]())
	q.ShutDown()
	assert.False(t, ProcessNext(context.Background(), q, "pipeline", nil, nil), "a shut-down queue ends the worker")
}

type countingRecorder map[string]int

func (c countingRecorder) SyncPanicked(kind string) { c[kind]++ }

// TestPanickingSyncFailsOnlyItsKey: a panic in one object's sync is that object's failure,
// retried with backoff, never the process's; the next key is served.
func TestPanickingSyncFailsOnlyItsKey(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](time.Hour, time.Hour))
	defer q.ShutDown()
	poison, other := cache.ObjectName{Namespace: "a", Name: "poison"}, cache.ObjectName{Namespace: "b", Name: "p"}
	q.Add(poison)
	q.Add(other)
	panics := countingRecorder{}
	var synced []cache.ObjectName
	sync := func(_ context.Context, k cache.ObjectName) (time.Duration, error) {
		if k == poison {
			var s []int
			end := -1
			_ = s[:end] // slice bounds out of range [:-1], as the cron parser did
		}
		synced = append(synced, k)
		return 0, nil
	}
	assert.NotPanics(t, func() {
		assert.True(t, ProcessNext(ctx, q, "trigger", sync, panics))
		assert.True(t, ProcessNext(ctx, q, "trigger", sync, panics))
	})
	assert.Equal(t, []cache.ObjectName{other}, synced)
	assert.Equal(t, 1, q.NumRequeues(poison), "the panicking key is retried with backoff")
	assert.Zero(t, q.NumRequeues(other))
	assert.Equal(t, countingRecorder{"trigger": 1}, panics)
}
