package main

import (
	"context"
	"go.opentelemetry.io/otel/trace"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

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
	// tracer traces pipelines; nil when --otlp-endpoint is not set.
	tracer trace.Tracer
	// publishCatalog publishes this replica's executor catalogue once it leads: the
	// catalogue says what the replica that acts offers, not what the last replica to start
	// (a standby, or the new one of a rolling update) does. Nil: not published.
	publishCatalog func(context.Context)
	// archive keeps the pipelines' records; nil: archiving is off.
	archive controller.Archiver
}

// run starts the informers and the controller, and returns once they have stopped. When
// ctx ends it takes no more work and gives the hooks in flight the shutdown grace period;
// when lead ends (this replica lost the Lease) it cancels them at once.
func (e *engine) run(ctx, lead context.Context) error {
	if e.publishCatalog != nil {
		// In the background: a catalogue that cannot be written yet never delays pipelines.
		publishCtx, stopPublishing := context.WithCancel(lead)
		defer stopPublishing()
		go e.publishCatalog(publishCtx)
	}
	// The engine never reads managedFields nor kubectl's last-applied copy: dropping them
	// from the cache saves 1-1.5 KiB per pipeline (make bench), and as much again for
	// pipelines made with kubectl apply.
	factory := informers.NewSharedInformerFactoryWithOptions(e.clients.stepwise, e.opts.resync,
		informers.WithTransform(controller.TrimForCache))
	faults := metrics.NewFaults(e.metrics)
	// Each list of pipelines leaves out the resting ones: a sweep after it finds those
	// that changed meanwhile.
	sweeps := make(chan struct{}, 1)
	undecodable := useLenientInformers(factory, e.clients.stepwise, faults, klog.FromContext(ctx), func() {
		select {
		case sweeps <- struct{}{}:
		default: // one is due already
		}
	})
	// Namespaces are watched so that a teardown that cannot run in a namespace being
	// deleted is skipped rather than holding it in Terminating (no GET on that path).
	kubeFactory := kubeinformers.NewSharedInformerFactoryWithOptions(e.clients.kube, e.opts.resync,
		kubeinformers.WithTransform(trimNamespace))
	namespaces := kubeFactory.Core().V1().Namespaces()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.clients.kube.Discovery()))
	queueMetrics := metrics.NewWorkqueueProvider(e.metrics) // registered once, for both queues
	// Executors act as a pipeline's ServiceAccount; a trigger taints waiting nodes as its own.
	clients := impersonate.NewClientProvider(e.clients.config, mapper)
	share, borrow := e.opts.workerShares()
	c, err := controller.New(ctx, controller.Config{
		Client:               e.clients.stepwise,
		Informer:             factory.Stepwise().V1alpha1().Pipelines(),
		Templates:            factory.Stepwise().V1alpha1().PipelineTemplates(),
		Executors:            e.executors,
		Clients:              clients,
		Recorder:             e.recorder,
		Namespaces:           namespaces.Lister(),
		Metrics:              metrics.New(e.metrics),
		Tracer:               e.tracer,
		Faults:               faults,
		UndecodablePipelines: undecodable.pipelines,
		UndecodableTemplates: undecodable.templates,
		WorkqueueMetrics:     queueMetrics,
		ShutdownGrace:        e.opts.shutdownGrace,
		HookCallTimeout:      e.opts.hookCall,
		NamespaceShare:       share,
		NamespaceBorrow:      borrow,
		Approvals:            factory.Stepwise().V1alpha1().Approvals(),
		Triggers:             factory.Stepwise().V1alpha1().PipelineTriggers(),
		ApprovalAccess:       controller.SubjectAccessReviews{Client: e.clients.kube},
		Archive:              e.archive,
		DefaultRetention:     e.opts.defaultRetention,
	})
	if err != nil {
		return err
	}
	// State metrics: the leader's caches, read at each scrape (a standby exports none).
	metrics.NewState(e.metrics, metrics.StateSource{
		Pipelines: factory.Stepwise().V1alpha1().Pipelines().Lister(),
		Triggers:  factory.Stepwise().V1alpha1().PipelineTriggers().Lister(),
		KnownExecutor: func(name string) bool {
			_, ok := e.executors.Get(name)
			return ok
		},
		Now: time.Now,
	})
	rbacFactory := e.newRBACInformers()
	triggers, err := e.newTriggers(ctx, factory, rbacFactory, mapper, clients, queueMetrics, faults, undecodable.triggers)
	if err != nil {
		return err
	}
	// The informers feed the workers while they drain, and stop with them.
	informersCtx, stopInformers := context.WithCancel(lead)
	factory.Start(informersCtx.Done())
	defer factory.Shutdown()
	kubeFactory.Start(informersCtx.Done())
	defer kubeFactory.Shutdown()
	rbacFactory.Start(informersCtx.Done())
	defer rbacFactory.Shutdown()
	defer stopInformers() // before the Shutdowns, which wait for the informers
	defer e.runTriggers(ctx, informersCtx, triggers)()
	go sweepResting(informersCtx, c, e.clients.stepwise, sweeps, factory.Stepwise().V1alpha1().Pipelines().Informer().HasSynced)
	go func() {
		if allSynced(factory.WaitForCacheSync(ctx.Done())) && allSynced(kubeFactory.WaitForCacheSync(ctx.Done())) {
			e.ready.Store(true)
		}
	}()
	return c.RunLeading(ctx, lead, e.opts.workers)
}

// trimNamespace keeps of a Namespace what the engine reads: its name, deletion time and
// phase.
func trimNamespace(obj any) (any, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	return &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{
			Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion, DeletionTimestamp: ns.DeletionTimestamp,
		},
		Status: corev1.NamespaceStatus{Phase: ns.Status.Phase},
	}, nil
}

func allSynced[K comparable](synced map[K]bool) bool {
	for _, ok := range synced {
		if !ok {
			return false
		}
	}
	return true
}
