package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// engineStopTimeout is how long the engine may take to stop once its hooks are cancelled.
const engineStopTimeout = 5 * time.Second

var (
	// errLostLease is returned by a leader that lost its Lease: it must exit, as another
	// replica may already be running pipelines.
	errLostLease = errors.New("lost the Lease")
	// errEngineStuck is returned when the engine overran its time to stop: its hooks may
	// still run, so the Lease is left to expire rather than released (see leaseLock).
	errEngineStuck = errors.New("the engine did not stop in time")
)

// engineFunc runs the engine until it has stopped. When ctx ends it takes no more work and
// lets the hooks in flight finish, within the shutdown grace period; when lead ends it
// cancels them at once.
type engineFunc func(ctx, lead context.Context) error

// leaderElection runs the engine only while this replica holds the Lease, and never while
// another replica may hold it.
type leaderElection struct {
	lock          resourcelock.Interface
	name          string
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	shutdownGrace time.Duration
	// stopTimeout is how long the engine may take to stop once its hooks are cancelled.
	stopTimeout time.Duration
	// Optional.
	healthz *leaderelection.HealthzAdaptor
}

// newLeaderElection takes part in the election for the Lease of the flags, as this host
// and process.
func newLeaderElection(opts *options, kube kubernetes.Interface, recorder record.EventRecorder,
	healthz *leaderelection.HealthzAdaptor) (*leaderElection, error) {
	hostname, _ := os.Hostname()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, opts.leaseNamespace(), opts.leaderElectID,
		kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity(hostname), EventRecorder: recorder})
	if err != nil {
		return nil, fmt.Errorf("create leader election lock: %w", err)
	}
	return &leaderElection{
		lock:          lock,
		name:          opts.leaderElectID,
		leaseDuration: opts.leaseDuration,
		renewDeadline: opts.renewDeadline,
		retryPeriod:   opts.retryPeriod,
		shutdownGrace: opts.shutdownGrace,
		stopTimeout:   engineStopTimeout,
		healthz:       healthz,
	}, nil
}

// run stands by until this replica holds the Lease, then runs engine. When ctx ends, a
// leader keeps its Lease, and renews it, while the engine drains, and releases it only
// then, so that a standby does not run hooks next to ours. A leader that loses its Lease
// cancels its hooks at once and returns errLostLease. A standby returns nil when ctx ends.
func (l *leaderElection) run(ctx context.Context, engine engineFunc) error {
	logger := klog.FromContext(ctx)
	lock := newLeaseLock(l.lock)
	// The election outlives ctx: it ends, releasing the Lease, once the engine has stopped.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	leading := make(chan context.Context, 1)
	engineDone := make(chan error, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   l.leaseDuration,
		RenewDeadline:   l.renewDeadline,
		RetryPeriod:     l.retryPeriod,
		ReleaseOnCancel: true, // once the engine has stopped: see leaseLock
		WatchDog:        l.healthz,
		Name:            l.name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lead context.Context) {
				stopped := make(chan struct{})
				defer close(stopped)
				lock.engineRunning(stopped)
				lead = lock.lapsed(lead, l.lapseAfter())
				leading <- lead
				logger.Info("Became the leader, starting the engine")
				engineDone <- engine(ctx, lead)
			},
			// run tells a lost Lease from the end of the election it asked for.
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	if l.healthz != nil {
		l.healthz.SetLeaderElection(le)
	}
	electionDone := make(chan struct{})
	go func() {
		defer close(electionDone)
		le.Run(electCtx)
	}()

	var lead context.Context
	select {
	case lead = <-leading:
	case <-ctx.Done():
		select {
		case lead = <-leading:
		default:
			return l.stopStandingBy(ctx, lock, stopElecting, electionDone, leading, engineDone)
		}
	}
	lost, err := l.awaitEngine(ctx, lead, engineDone)
	switch {
	case errors.Is(err, errEngineStuck):
		logger.Error(err, "Leaving the Lease to expire")
	case !lost:
		logger.Info("Engine stopped, releasing the Lease")
	}
	stopElecting()
	<-electionDone
	if lost {
		return errors.Join(errLostLease, err)
	}
	return err
}

// stopStandingBy ends the election of a standby told to stop.
func (l *leaderElection) stopStandingBy(ctx context.Context, lock *leaseLock, stopElecting func(), electionDone <-chan struct{},
	leading <-chan context.Context, engineDone <-chan error) error {
	stopElecting()
	<-electionDone
	if !lock.acquired() {
		klog.FromContext(ctx).Info("Stopped standing by")
		return nil
	}
	// It took the Lease just then, so client-go starts the engine, but with ctx and lead
	// ended: it starts no work.
	<-leading
	select {
	case err := <-engineDone:
		return err
	case <-time.After(l.stopTimeout):
		return errEngineStuck
	}
}

// awaitEngine waits for the engine to stop: drained after ctx ended, at once when lead
// ended (lost tells), or on its own, as when it failed. It gives up when the engine
// overruns its grace period, or does not stop once its hooks are cancelled.
func (l *leaderElection) awaitEngine(ctx, lead context.Context, engineDone <-chan error) (lost bool, err error) {
	logger := klog.FromContext(ctx)
	stopping, losing := ctx.Done(), lead.Done()
	var deadline <-chan time.Time
	for {
		select {
		case err := <-engineDone:
			return lost, err
		case <-stopping:
			stopping = nil
			logger.Info("Shutting down, keeping the Lease until the engine has drained", "grace", l.shutdownGrace)
			if deadline == nil {
				deadline = time.After(l.shutdownGrace + l.stopTimeout)
			}
		case <-losing:
			losing, lost = nil, true
			cause := "renewal failed" // client-go gave up renewing
			if errors.Is(context.Cause(lead), errLeaseLapsed) {
				cause = errLeaseLapsed.Error()
			}
			logger.Error(nil, "Lost the Lease, running hooks cancelled", "cause", cause)
			deadline = time.After(l.stopTimeout)
		case <-deadline:
			return lost, errEngineStuck
		}
	}
}

// lapseAfter is how long after its last renewal the leader stops acting: when client-go
// gives up renewing (a retry period, then a renew deadline of retries), and never after
// the Lease has expired for the standbys.
func (l *leaderElection) lapseAfter() time.Duration {
	return min(l.retryPeriod+l.renewDeadline, l.leaseDuration)
}

// identity names this replica in the Lease: host name and PID.
func identity(hostname string) string {
	if hostname == "" {
		hostname = "stepwise"
	}
	return fmt.Sprintf("%s_%d", hostname, os.Getpid())
}
