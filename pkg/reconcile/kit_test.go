package reconcile

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
)

// TestWorkersGiveRunningSyncsTheirGrace: once ctx is done, a running sync goes on for the
// grace period and finishes uncancelled if it can; one that outlasts it sees its context
// cancelled; and a lost lease (work ended) cancels it at once, grace or not.
func TestWorkersGiveRunningSyncsTheirGrace(t *testing.T) {
	tests := []struct {
		name string
		// syncTakes is how long the sync runs unless cancelled.
		syncTakes time.Duration
		grace     time.Duration
		leaseLost bool
		cancelled bool
	}{
		{name: "finishes within its grace", syncTakes: 50 * time.Millisecond, grace: time.Minute},
		{name: "outlasts its grace", syncTakes: time.Minute, grace: 50 * time.Millisecond, cancelled: true},
		{name: "no grace", syncTakes: time.Minute, cancelled: true},
		{name: "the lease lost", syncTakes: time.Minute, grace: time.Minute, leaseLost: true, cancelled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, base := ktesting.NewTestContext(t)
			ctx, stop := context.WithCancel(base)
			work, loseLease := context.WithCancel(base)
			defer loseLease()
			q := NewQueue(QueueConfig{Name: "test", Share: 1})
			started := make(chan struct{})
			cancelled := make(chan bool, 1)
			q.Add(cache.ObjectName{Namespace: "ns", Name: "a"})
			w := Workers{Queue: q, Kind: "test", Grace: tt.grace, Sync: func(syncCtx context.Context, _ cache.ObjectName) (time.Duration, error) {
				close(started)
				select {
				case <-syncCtx.Done():
					cancelled <- true
				case <-time.After(tt.syncTakes):
					cancelled <- false
				}
				return 0, nil
			}}
			done := make(chan struct{})
			go func() { defer close(done); w.Run(ctx, work, 2) }()
			<-started
			if tt.leaseLost {
				loseLease()
			}
			stop()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				require.Fail(t, "Run did not return")
			}
			assert.Equal(t, tt.cancelled, <-cancelled)
			assert.True(t, q.ShuttingDown(), "the queue is shut down")
		})
	}
}
