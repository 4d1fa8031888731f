package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// runLeaderElected runs engine while this replica holds the Lease. A replica that loses the
// Lease exits at once, as another may already be running pipelines; a standby returns when
// ctx ends.
func runLeaderElected(ctx context.Context, opts *options, kube kubernetes.Interface, recorder record.EventRecorder,
	election *leaderelection.HealthzAdaptor, engine func(context.Context) error) error {
	logger := klog.FromContext(ctx)
	hostname, _ := os.Hostname()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, opts.leaseNamespace(), opts.leaderElectID,
		kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity(hostname), EventRecorder: recorder})
	if err != nil {
		return fmt.Errorf("create leader election lock: %w", err)
	}
	engineDone := make(chan error, 1)
	var led atomic.Bool
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   opts.leaseDuration,
		RenewDeadline:   opts.renewDeadline,
		RetryPeriod:     opts.retryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        election,
		Name:            opts.leaderElectID,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				led.Store(true)
				logger.Info("Became the leader, starting the engine")
				engineDone <- engine(ctx)
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					logger.Error(nil, "Lost leadership, exiting")
					klog.FlushAndExit(klog.ExitFlushTimeout, 1)
				}
			},
		},
	})
	if !led.Load() {
		return nil // a standby has no engine to wait for
	}
	// RunOrDie returns on shutdown, possibly before the engine has drained its workers.
	select {
	case err := <-engineDone:
		return err
	case <-time.After(opts.shutdownGrace + 5*time.Second):
		return errors.New("engine did not stop within the shutdown grace period")
	}
}

// identity names this replica in the Lease: host name and PID.
func identity(hostname string) string {
	if hostname == "" {
		hostname = "stepwise"
	}
	return fmt.Sprintf("%s_%d", hostname, os.Getpid())
}
