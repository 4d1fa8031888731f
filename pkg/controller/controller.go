// Package controller is the Stepwise engine: a client-go controller that runs each
// Pipeline's steps through TaskExecutors, records their progress in the status, and runs
// their teardown in reverse order behind a finalizer when the Pipeline is deleted.
package controller

import (
	"context"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/trace"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/scheme"
	informers "github.com/stepwise-dev/stepwise/pkg/generated/informers/externalversions/stepwise/v1alpha1"
	listers "github.com/stepwise-dev/stepwise/pkg/generated/listers/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/lenient"
	"github.com/stepwise-dev/stepwise/pkg/metrics"
	"github.com/stepwise-dev/stepwise/pkg/reconcile"
)

const (
	// ControllerName is the workqueue's name and the source of Events.
	ControllerName = "stepwise-operator"

	// defaultRequeueAfter is when a hook that is not done and named no time is asked again.
	defaultRequeueAfter = 5 * time.Second

	// Our own writes are kept until the informer delivers them (normally milliseconds), at
	// most this long: a bound on memory, not a tuning knob.
	mutationCacheTTL = 5 * time.Minute
)

// ExecutorLookup finds an executor by name; *executor.Registry is one.
type ExecutorLookup interface {
	Get(name string) (executor.TaskExecutor, bool)
	// Missing explains why no executor of that name is registered (e.g. its plugin was
	// refused), for the failed step's condition.
	Missing(name string) error
	// RefusalFor is the refusal of the plugin that would serve the executor, when the
	// operator refused it: a step of it waits, saying so, rather than fail.
	RefusalFor(name string) (executor.Refusal, bool)
}

// Config holds the controller's dependencies.
type Config struct {
	Client    clientset.Interface
	Informer  informers.PipelineInformer
	Executors ExecutorLookup
	Clients   executor.ClientProvider
	Recorder  record.EventRecorder
	// Templates are the PipelineTemplates pipelines refer to (spec.templateRef); a pipeline
	// waiting for its template starts when the template appears. Optional: without it, a
	// pipeline with a templateRef waits.
	Templates informers.PipelineTemplateInformer
	// Namespaces tells whether a pipeline's namespace is being deleted, when a teardown
	// cannot start. Optional: without it, such a teardown waits for a retry.
	Namespaces corelisters.NamespaceLister
	// Optional.
	Metrics *metrics.Metrics
	// Tracer, when set, traces pipelines: a span per hook call, step and pipeline
	// (pkg/tracing); nil traces nothing.
	Tracer trace.Tracer
	// Faults counts syncs that panicked.
	Faults *metrics.Faults
	// UndecodablePipelines and UndecodableTemplates tell which objects the informers
	// could not decode (lenient informers); nil: every object decodes (the generated
	// informers fail as a whole instead).
	UndecodablePipelines lenient.DecodeErrors
	UndecodableTemplates lenient.DecodeErrors
	// Raw patches a pipeline that cannot be decoded; default: the clientset's REST client.
	Raw              lenient.Patcher
	WorkqueueMetrics workqueue.MetricsProvider
	Clock            clock.WithTicker
	Jitter           func(time.Duration) time.Duration
	ShutdownGrace    time.Duration
	// HookCallTimeout bounds one call of a hook, whatever the step's timeout, so that a
	// call that does not answer frees its worker: long work returns Wait. 0: no bound.
	HookCallTimeout time.Duration
	// Approvals are the decisions on steps that wait for approval, Triggers the triggers
	// whose creator four eyes also refuses, and ApprovalAccess asks whether an approver
	// may approve. Optional: without Approvals a step that needs approval waits until its
	// deadline; without the others no approval counts.
	Approvals      informers.ApprovalInformer
	Triggers       informers.PipelineTriggerInformer
	ApprovalAccess ApprovalAccess
	// NamespaceShare caps how many pipelines of one namespace are synced at once while
	// another namespace's wait (0: no cap; each of N namespaces with work holds about
	// NamespaceBorrow ÷ N, fairqueue.Shares), and NamespaceBorrow is how many while none
	// waits (keep it under the number of workers).
	NamespaceShare, NamespaceBorrow int
	// Archive, when set, keeps a record of each pipeline's state as it finishes and as it
	// goes away (pkg/archive); a deleted pipeline keeps its finalizer until its record is
	// written. nil: no archive.
	Archive Archiver
	// DefaultRetention is the retention of the pipelines that set none, nor their
	// template, and whose steps recorded nothing they created (retentionOf); 0: none.
	DefaultRetention time.Duration
}

// Controller runs Pipelines.
type Controller struct {
	// syncEnv is all a pipeline's sync sees of the controller.
	*syncEnv
	client clientset.Interface
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[cache.ObjectName]
	faults *metrics.Faults
	// undecodable may be nil.
	undecodable   lenient.DecodeErrors
	raw           lenient.Patcher
	shutdownGrace time.Duration
}

// syncEnv is what one pipeline's sync reads and calls beyond the pipeline itself: the
// executors and their clients, the caches of pipelines, templates, namespaces, approvals
// and triggers, the clock, and where it reports (Events, metrics, traces). The controller
// owns it; a sync reaches nothing else of the controller (its queue, API client, informers).
type syncEnv struct {
	// pipelines is the informer's cache overlaid with the objects our own writes returned,
	// whichever is newer: a sync that follows our write never works from the state before
	// it (which would run hooks again), even when the informer has not caught up yet.
	pipelines cache.MutationCache
	recorder  record.EventRecorder
	executors ExecutorLookup
	clients   executor.ClientProvider
	// namespaces and templates may be nil.
	namespaces corelisters.NamespaceLister
	templates  listers.PipelineTemplateLister
	metrics    *metrics.Metrics
	tracer     trace.Tracer
	// undecodableTemplates may be nil.
	undecodableTemplates lenient.DecodeErrors
	clock                clock.WithTicker
	// jitter adds randomness to a retry's backoff; tests replace it to get exact times.
	jitter func(time.Duration) time.Duration
	// hookCallTimeout bounds one call of a hook; 0: only the attempt's deadline does.
	hookCallTimeout time.Duration
	// due holds each waiting hook back until the time it asked for.
	due *dueCalls
	// approvals (indexed by pipeline), triggers and approvalAccess may be nil.
	approvals      cache.Indexer
	triggers       listers.PipelineTriggerLister
	approvalAccess ApprovalAccess
	// shuttingDown tells whether the operator is stopping: a sync starts no new step then.
	shuttingDown func() bool
	// archive may be nil: archiving is off.
	archive Archiver
	// defaultRetention: see Config.DefaultRetention.
	defaultRetention time.Duration
}

// New creates a controller and registers its event handlers on the informer.
func New(ctx context.Context, cfg Config) (*Controller, error) {
	c := newController(ctx, cfg)
	if err := c.addHandlers(cfg); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(4).Info("Controller created")
	return c, nil
}

// newController makes the controller of cfg: its cache, clients and queue.
func newController(ctx context.Context, cfg Config) *Controller {
	logger := klog.FromContext(ctx)
	c := &Controller{
		syncEnv: &syncEnv{
			pipelines:            reconcile.NewOverlay(logger, cfg.Informer.Informer(), mutationCacheTTL, false),
			recorder:             cfg.Recorder,
			executors:            cfg.Executors,
			clients:              cfg.Clients,
			namespaces:           cfg.Namespaces,
			metrics:              cfg.Metrics,
			tracer:               cfg.Tracer,
			undecodableTemplates: cfg.UndecodableTemplates,
			clock:                cfg.Clock,
			jitter:               cfg.Jitter,
			hookCallTimeout:      cfg.HookCallTimeout,
			due:                  newDueCalls(),
			approvalAccess:       cfg.ApprovalAccess,
			archive:              cfg.Archive,
			defaultRetention:     cfg.DefaultRetention,
		},
		client:        cfg.Client,
		synced:        cfg.Informer.Informer().HasSynced,
		faults:        cfg.Faults,
		undecodable:   cfg.UndecodablePipelines,
		raw:           cfg.Raw,
		shutdownGrace: cfg.ShutdownGrace,
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.raw == nil {
		c.raw = lenient.RESTPatcher{Client: cfg.Client.StepwiseV1alpha1().RESTClient(), Resource: "pipelines",
			FieldManager: ControllerName, ParameterCodec: scheme.ParameterCodec}
	}
	if c.jitter == nil {
		c.jitter = func(d time.Duration) time.Duration { return wait.Jitter(d, 0.1) }
	}
	// Namespaces share the workers: one whose hooks hang or that has thousands of
	// pipelines does not hold up another's. Step retries have their own backoff, kept in
	// the status.
	c.queue = reconcile.NewQueue(reconcile.QueueConfig{Name: ControllerName, Metrics: cfg.WorkqueueMetrics, Clock: c.clock,
		Share: cfg.NamespaceShare, Borrow: cfg.NamespaceBorrow})
	c.shuttingDown = c.queue.ShuttingDown

	return c
}

// addHandlers queues the pipelines that the changes of pipelines, templates and approvals
// concern, and keeps the pipelines' cache in step.
func (c *Controller) addHandlers(cfg Config) error {
	_, err := cfg.Informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		// Every update counts, our own status writes included: they start the next step.
		// A resync with nothing new is cheap, as a reconcile that changes nothing writes
		// nothing. Once the informer has caught up with our write, the copy we kept of it
		// is dropped.
		UpdateFunc: func(_, newObj any) {
			if p, ok := newObj.(*v1alpha1.Pipeline); ok {
				c.pipelines.OnAddOrUpdate(p)
			}
			c.enqueue(newObj)
		},
		DeleteFunc: func(obj any) {
			if p, ok := obj.(*v1alpha1.Pipeline); ok {
				c.pipelines.OnDelete(p)
			}
			c.enqueue(obj)
		},
	})
	if err != nil {
		return fmt.Errorf("add pipeline event handler: %w", err)
	}
	if cfg.Templates != nil {
		if err := cfg.Informer.Informer().AddIndexers(cache.Indexers{templateIndex: byTemplate}); err != nil {
			return fmt.Errorf("index pipelines by template: %w", err)
		}
		c.templates = cfg.Templates.Lister()
		c.synced = syncedAll(c.synced, cfg.Templates.Informer().HasSynced)
		if _, err := cfg.Templates.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueueUsersOf,
			UpdateFunc: func(_, newObj any) { c.enqueueUsersOf(newObj) },
		}); err != nil {
			return fmt.Errorf("add template event handler: %w", err)
		}
	}
	if cfg.Approvals != nil {
		if err := c.watchApprovals(cfg.Approvals); err != nil {
			return err
		}
	}
	if cfg.Triggers != nil {
		// Four eyes reads who made a pipeline's trigger: never from a cache not yet filled,
		// which would take the trigger for gone.
		c.triggers = cfg.Triggers.Lister()
		c.synced = syncedAll(c.synced, cfg.Triggers.Informer().HasSynced)
	}
	return nil
}

// enqueue adds the key of a Pipeline, or of the tombstone of a deleted one, to the queue.
func (c *Controller) enqueue(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	name, err := cache.ObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("enqueue pipeline: %w", err))
		return
	}
	c.queue.Add(name)
}

// templateIndex indexes pipelines by the template they refer to, as "namespace/name".
const templateIndex = "template"

func byTemplate(obj any) ([]string, error) {
	p, ok := obj.(*v1alpha1.Pipeline)
	if !ok || p.Spec.TemplateRef == nil {
		return nil, nil
	}
	return []string{p.Namespace + "/" + p.Spec.TemplateRef.Name}, nil
}

// enqueueUsersOf enqueues the pipelines that wait for the template: those that refer to
// it and have not taken it yet.
func (c *Controller) enqueueUsersOf(obj any) {
	t, ok := obj.(*v1alpha1.PipelineTemplate)
	if !ok {
		return
	}
	users, err := c.pipelines.ByIndex(templateIndex, t.Namespace+"/"+t.Name)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("pipelines of template %s/%s: %w", t.Namespace, t.Name, err))
		return
	}
	for _, u := range users {
		if p, ok := u.(*v1alpha1.Pipeline); ok && p.Status.Template == nil {
			c.enqueue(p)
		}
	}
}

func syncedAll(fns ...cache.InformerSynced) cache.InformerSynced {
	return func() bool {
		for _, f := range fns {
			if !f() {
				return false
			}
		}
		return true
	}
}

// Run waits for the cache to sync, then runs workers until ctx is done. Hooks running at
// that moment get up to the shutdown grace period to finish before their context is
// cancelled, so a SIGTERM does not cut a cloud call in half.
func (c *Controller) Run(ctx context.Context, workers int) error {
	return c.RunLeading(ctx, context.WithoutCancel(ctx), workers)
}

// RunLeading is Run for a replica that may act only while it holds a lease, until lead
// ends: syncs (hooks and writes) run on lead, and when it ends they are cancelled at once,
// without grace, and the workers stop, as another replica may already be running the same
// pipelines. ctx ending still stops the workers with the grace period.
func (c *Controller) RunLeading(ctx, lead context.Context, workers int) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(lead, stop)()

	logger.Info("Waiting for the pipeline cache to sync")
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		c.queue.ShutDown()
		return errors.New("wait for the pipeline cache to sync: cancelled")
	}
	logger.Info("Starting workers", "count", workers)
	// Work runs on its own context: it outlives ctx by the grace period, never lead.
	reconcile.Workers{Queue: c.queue, Kind: "pipeline", Sync: c.syncHandler, Panics: c.faults, Grace: c.shutdownGrace}.Run(ctx, lead, workers)
	if lead.Err() != nil {
		logger.Info("Lead lost, running hooks were cancelled")
	}
	logger.Info("Workers stopped")
	return nil
}
