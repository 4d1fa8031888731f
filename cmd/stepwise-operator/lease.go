package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// errLeaseLapsed is why the leader stops when it has not renewed its Lease in time.
var errLeaseLapsed = errors.New("the Lease was not renewed in time")

// leaseLock is the Lease lock as the leader uses it, keeping two promises client-go does
// not keep on its own:
//   - the Lease is never released while the engine runs: client-go releases it
//     (ReleaseOnCancel) as soon as it stops renewing, and after a failed renewal it does so
//     before it cancels the leader's context, with hooks still in flight;
//   - the leader stops acting once its Lease may lapse (see lapsed), even while client-go
//     is still trying to release a Lease it can no longer renew.
type leaseLock struct {
	resourcelock.Interface

	mu sync.Mutex
	// renewed is when the last write naming this replica the holder started: a standby
	// may take the Lease over a lease duration after it saw that write, no earlier.
	renewed time.Time
	// engineDone is closed when the engine has returned; nil while it has not started.
	engineDone <-chan struct{}
}

func newLeaseLock(lock resourcelock.Interface) *leaseLock {
	return &leaseLock{Interface: lock}
}

func (l *leaseLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, rec, l.Interface.Create)
}

// Update renews the Lease or, when it names no holder, releases it.
func (l *leaseLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if rec.HolderIdentity == l.Identity() {
		return l.write(ctx, rec, l.Interface.Update)
	}
	// Releasing. client-go's release gives up when ctx ends (a renew deadline), leaving
	// the Lease to expire. After a failed renewal client-go releases before it ends lead,
	// so this wait ends in time only because lapsed, which fires no later than client-go
	// gives up, has already ended the engine's lead.
	if err := l.awaitEngine(ctx); err != nil {
		return fmt.Errorf("release the Lease once the engine has stopped: %w", err)
	}
	if err := l.Interface.Update(ctx, rec); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Released the Lease", "lock", l.Describe())
	return nil
}

// write notes when a successful write made this replica the holder.
func (l *leaseLock) write(ctx context.Context, rec resourcelock.LeaderElectionRecord,
	write func(context.Context, resourcelock.LeaderElectionRecord) error) error {
	start := time.Now()
	if err := write(ctx, rec); err != nil {
		return err
	}
	l.mu.Lock()
	l.renewed = start
	l.mu.Unlock()
	return nil
}

// acquired tells whether this replica has held the Lease.
func (l *leaseLock) acquired() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.renewed.IsZero()
}

// engineRunning says the engine runs until done is closed; until then the Lease is not
// released.
func (l *leaseLock) engineRunning(done <-chan struct{}) {
	l.mu.Lock()
	l.engineDone = done
	l.mu.Unlock()
}

func (l *leaseLock) awaitEngine(ctx context.Context) error {
	l.mu.Lock()
	done := l.engineDone
	l.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lapsed returns a context that ends with lead, or once the Lease has gone unrenewed for
// longer than after, with errLeaseLapsed as its cause. client-go ends lead when it gives up
// renewing, but only after trying to release the Lease, which against an API server that
// does not answer takes up to another renew deadline, while a standby may take over a lease
// duration after our last renewal.
func (l *leaseLock) lapsed(lead context.Context, after time.Duration) context.Context {
	// No cancel function to return: the context lives as long as lead, and only lead or a
	// lapse should end it, so that its end means the Lease is lost.
	ctx, cancel := context.WithCancelCause(lead)
	go func() {
		for {
			l.mu.Lock()
			left := time.Until(l.renewed.Add(after))
			l.mu.Unlock()
			if left <= 0 {
				cancel(errLeaseLapsed)
				return
			}
			timer := time.NewTimer(left)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
		}
	}()
	return ctx
}
