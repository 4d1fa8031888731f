package main

import (
	"context"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/record"

	"github.com/stepwise-dev/stepwise/pkg/controller"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	informers "github.com/stepwise-dev/stepwise/pkg/generated/informers/externalversions"
	"github.com/stepwise-dev/stepwise/pkg/impersonate"
	"github.com/stepwise-dev/stepwise/pkg/metrics"
)

// engine is what the controller needs, gathered so that it can start later, when this
// replica becomes the leader.
type engine struct {
	opts      *options
	clients   *clients
	executors *executor.Registry
	recorder  record.EventRecorder
	metrics   *prometheus.Registry
	// ready is set once the informer caches have synced.
	ready *atomic.Bool
}

// run starts the informers and the controller, and returns when ctx ends.
func (e *engine) run(ctx context.Context) error {
	// The engine never reads managedFields nor kubectl's last-applied copy: dropping them
	// from the cache saves 1-1.5 KiB per pipeline (make bench), and as much again for
	// pipelines made with kubectl apply.
	factory := informers.NewSharedInformerFactoryWithOptions(e.clients.stepwise, e.opts.resync,
		informers.WithTransform(controller.TrimForCache))
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.clients.kube.Discovery()))
	c, err := controller.New(ctx, controller.Config{
		Client:           e.clients.stepwise,
		Informer:         factory.Stepwise().V1alpha1().Pipelines(),
		Executors:        e.executors,
		Clients:          impersonate.NewClientProvider(e.clients.config, mapper),
		Recorder:         e.recorder,
		Metrics:          metrics.New(e.metrics),
		WorkqueueMetrics: metrics.NewWorkqueueProvider(e.metrics),
		ShutdownGrace:    e.opts.shutdownGrace,
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	go func() {
		if factory.WaitForCacheSync(ctx.Done()) != nil {
			e.ready.Store(true)
		}
	}()
	return c.Run(ctx, e.opts.workers)
}
