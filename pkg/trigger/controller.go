// Package trigger is the PipelineTrigger controller: for every object of a kind that
// matches a trigger's selector it creates one Pipeline of the trigger's template, at most
// spec.concurrency unfinished at a time, and only while the trigger's ServiceAccount may
// list and watch that kind.
//
// It is a client-go controller like the engine (pkg/controller): informers for triggers,
// templates and pipelines (shared with the engine), one shared dynamic informer per kind
// that some trigger watches, a rate-limited workqueue of trigger keys, and a sync that
// reads from those caches only and writes pipelines and the trigger's status. What it
// decides (which objects match, their order, the concurrency budget, the pipeline of an
// object, which pipelines are its own) is in package rules, which the clients share; the
// names it writes are in pkg/apis.
package trigger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/stepwise-dev/stepwise/pkg/accessreview"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/dynwatch"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/fairqueue"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/scheme"
	informers "github.com/stepwise-dev/stepwise/pkg/generated/informers/externalversions/stepwise/v1alpha1"
	listers "github.com/stepwise-dev/stepwise/pkg/generated/listers/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/lenient"
	"github.com/stepwise-dev/stepwise/pkg/reconcile"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

const (
	// ControllerName is the workqueue's name and the field manager of our writes.
	ControllerName = "stepwise-trigger"

	// Indexes added to the shared informers.
	// pipelineTriggerIndex: pipelines by namespace/value of LabelTrigger.
	pipelineTriggerIndex = "stepwise.dev/trigger"
	// triggerLabelIndex: triggers by namespace/value of LabelTrigger they give.
	triggerLabelIndex = "stepwise.dev/trigger-label"
	// triggerTemplateIndex: triggers by namespace/template name.
	triggerTemplateIndex = "stepwise.dev/trigger-template"
	// triggerBudgetIndex: triggers by the LabelNodeBudget value of the budget they name.
	triggerBudgetIndex = "stepwise.dev/trigger-node-budget"
	// triggerUIDIndex: triggers by namespace/UID, the trigger a pipeline under a NodeBudget
	// names (rules.StartedUnder).
	triggerUIDIndex = "stepwise.dev/trigger-uid"
	// pipelineBudgetIndex: pipelines by their LabelNodeBudget, which anyone who may create
	// a pipeline can write: only rules.StartedUnder tells which of them a budget counts.
	pipelineBudgetIndex = "stepwise.dev/node-budget"

	// Our own writes are kept until the informer delivers them, at most this long (see
	// Controller.pipelines).
	mutationCacheTTL = time.Minute

	// accessChangeDelay gathers the RBAC changes of a burst (kubectl apply of a Role and
	// its binding, a namespace's default bindings) into one look at every trigger.
	accessChangeDelay = time.Second
)

// Config holds the controller's dependencies.
type Config struct {
	Client clientset.Interface
	// Operator is the user the operator acts as, as the API server authenticates it (a
	// SelfSubjectReview): a pipeline an earlier version made without LabelTriggerUID is
	// adopted only when the API server recorded Operator as its creator
	// (rules.OwnershipOf). Empty: none is adopted.
	Operator string
	// Kube makes the SubjectAccessReviews.
	Kube kubernetes.Interface
	// Clients act as a trigger's ServiceAccount (to taint waiting nodes).
	Clients executor.ClientProvider
	// Dynamic and Mapper watch the triggers' kinds.
	Dynamic dynamic.Interface
	Mapper  meta.RESTMapper
	// The informers of the operator's shared factory; New adds its indexes and handlers,
	// so it must be called before the factory starts.
	Triggers  informers.PipelineTriggerInformer
	Templates informers.PipelineTemplateInformer
	Pipelines informers.PipelineInformer
	// NodeBudgets are the budgets triggers on Nodes share.
	NodeBudgets informers.NodeBudgetInformer
	// Workers is how many workers Run will be given (the queue's shares of them per
	// namespace); 0: one.
	Workers int
	// GateHTTP makes the health gates' Prometheus queries to the URLs the gates name: it
	// must connect only where the installer allows (the egress policy); nil: gates of that
	// kind never hold, but where GatePrometheusURLs sets a URL.
	GateHTTP *http.Client
	// GatePrometheusURLs are the Prometheus URLs an operator admin set by namespace: a
	// gate of such a namespace queries that URL, through GateAdminHTTP, whatever URL it
	// names, and its query is sent as written (that Prometheus, or label proxy, holds what
	// the namespace may read). Elsewhere the operator scopes the query (gate.Scope).
	GatePrometheusURLs map[string]string
	// GateAdminHTTP makes the queries to GatePrometheusURLs.
	GateAdminHTTP *http.Client
	// Resources are the kinds the installer lets triggers watch (ParseResources).
	Resources []schema.GroupResource
	Recorder  record.EventRecorder
	// Optional.
	// Resync is the resync period of the objects' informers; 0: none.
	Resync time.Duration
	// AccessTTL is how long an answer on a trigger's rights is kept; 0: DefaultAccessTTL.
	AccessTTL time.Duration
	// GatesCheckTimeout bounds the check of all of a trigger's gates; 0:
	// DefaultGatesCheckTimeout.
	GatesCheckTimeout time.Duration
	// InformerReleaseAfter is how long the informer of a kind no trigger watches any more
	// keeps running before it stops; 0: dynwatch.DefaultReleaseAfter.
	InformerReleaseAfter time.Duration
	// AccessChanges are informers whose every change may change a trigger's rights (RBAC
	// Roles, ClusterRoles and their bindings). Of typed (rbac/v1) objects, a change makes
	// stale the answers of the triggers whose ServiceAccount it names, and looks at those
	// again; any other object (a metadata-only informer's) cannot be attributed, and
	// makes every answer stale, at most once per accessreview.UnattributedInterval.
	// accessreview.TrimRBAC is a transform that keeps of them what that needs. New adds an
	// index and its handler, so they must not have started.
	AccessChanges    []cache.SharedInformer
	WorkqueueMetrics workqueue.MetricsProvider
	// Faults counts syncs that panicked (*metrics.Faults, behind an interface so that this
	// package links no Prometheus).
	Faults reconcile.PanicRecorder
	// UndecodableTriggers tells which triggers the informer could not decode (a lenient
	// informer); nil: every trigger decodes.
	UndecodableTriggers lenient.DecodeErrors
	// Raw patches a trigger that cannot be decoded; default: the clientset's REST client.
	Raw   lenient.Patcher
	Clock clock.WithTicker
	// Archiving says the engine archives pipelines: the pipelines past a trigger's
	// historyLimit are then removed by retention (archived, without a teardown) rather
	// than deleted.
	Archiving bool
}

// Controller runs PipelineTriggers.
type Controller struct {
	client clientset.Interface
	// operator is the user the operator acts as (Config.Operator).
	operator string
	// triggers and pipelines are the informers' caches overlaid with what our own writes
	// returned, whichever is newer: a sync that follows our write never works from the
	// state before it (a pipeline created twice over the budget, a status written twice).
	triggers  cache.MutationCache
	pipelines cache.MutationCache
	// triggerIndexer finds the triggers of a pipeline or template.
	triggerIndexer cache.Indexer
	templates      listers.PipelineTemplateLister
	nodeBudgets    listers.NodeBudgetLister
	budgetLocks    budgetLocks
	gateHTTP       *http.Client
	conditions     conditionCache
	synced         []cache.InformerSynced
	queue          workqueue.TypedRateLimitingInterface[cache.ObjectName]
	recorder       record.EventRecorder
	clients        executor.ClientProvider
	resources      *resourceResolver
	access         *accessChecker
	// bindings attribute the RBAC changes of AccessChanges.
	bindings    *accessreview.Bindings
	objects     *dynwatch.Manager
	faults      reconcile.PanicRecorder
	undecodable lenient.DecodeErrors
	raw         lenient.Patcher
	clock       clock.WithTicker
	// archiving: see Config.Archiving.
	archiving bool

	// gateAdminHTTP and gatePrometheusURLs: see Config. Read only once made.
	gateAdminHTTP      *http.Client
	gatePrometheusURLs map[string]string
	gatesCheckTimeout  time.Duration

	mu sync.Mutex
	// memories are what each trigger's syncs remember between them.
	memories map[cache.ObjectName]*memory
}

// New creates the controller and registers its indexes and event handlers.
func New(ctx context.Context, cfg Config) (*Controller, error) {
	c := newController(ctx, cfg)
	if err := c.addIndexes(ctx, cfg); err != nil {
		return nil, err
	}
	if err := c.addHandlers(cfg); err != nil {
		return nil, err
	}
	if err := c.watchAccessChanges(cfg.AccessChanges); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(4).Info("Trigger controller created", "resources", cfg.Resources)
	return c, nil
}

// newController makes the controller of cfg: its caches, clients and queue.
func newController(ctx context.Context, cfg Config) *Controller {
	c := &Controller{
		client:      cfg.Client,
		operator:    cfg.Operator,
		clients:     cfg.Clients,
		templates:   cfg.Templates.Lister(),
		nodeBudgets: cfg.NodeBudgets.Lister(),
		gateHTTP:    cfg.GateHTTP,

		gateAdminHTTP:      cfg.GateAdminHTTP,
		gatesCheckTimeout:  cmp.Or(cfg.GatesCheckTimeout, DefaultGatesCheckTimeout),
		gatePrometheusURLs: cfg.GatePrometheusURLs,

		recorder:    cfg.Recorder,
		faults:      cfg.Faults,
		undecodable: cfg.UndecodableTriggers,
		raw:         cfg.Raw,
		clock:       cfg.Clock,
		archiving:   cfg.Archiving,
		memories:    map[cache.ObjectName]*memory{},
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.raw == nil {
		c.raw = lenient.RESTPatcher{Client: cfg.Client.StepwiseV1alpha1().RESTClient(), Resource: "pipelinetriggers",
			FieldManager: ControllerName, ParameterCodec: scheme.ParameterCodec}
	}
	c.resources = newResourceResolver(cfg.Mapper, cfg.Resources, c.clock)
	c.access = newAccessChecker(cfg.Kube, c.clock, cfg.AccessTTL)
	// The real clock and the tests' fake one both run functions later; a clock that
	// cannot releases informers on the real one.
	var later clock.WithDelayedExecution = clock.RealClock{}
	if d, ok := c.clock.(clock.WithDelayedExecution); ok {
		later = d
	}
	c.objects = dynwatch.New(dynwatch.Config{Client: cfg.Dynamic, Resync: cfg.Resync, ReleaseAfter: cfg.InformerReleaseAfter,
		Clock: later, Enqueue: c.enqueueKey, KeepFor: keptFieldsOf})
	// Namespaces take turns, so that one with thousands of triggers does not delay
	// another's; and a namespace holds at most its share of the workers, so that health
	// gates that answer slowly (GatesCheckTimeout) hold only its own triggers.
	share, borrow := fairqueue.Shares(max(cfg.Workers, 1), 0)
	c.queue = reconcile.NewQueue(reconcile.QueueConfig{Name: ControllerName, Metrics: cfg.WorkqueueMetrics, Clock: c.clock,
		Share: share, Borrow: borrow})

	return c
}

// addIndexes indexes the informers and makes the caches the syncs read: the triggers and
// pipelines overlaid with our own writes.
func (c *Controller) addIndexes(ctx context.Context, cfg Config) error {
	logger := klog.FromContext(ctx)
	triggers, templates, pipelines := cfg.Triggers.Informer(), cfg.Templates.Informer(), cfg.Pipelines.Informer()
	budgets := cfg.NodeBudgets.Informer()
	if err := triggers.AddIndexers(cache.Indexers{triggerLabelIndex: byTriggerLabel, triggerTemplateIndex: byTemplate,
		triggerBudgetIndex: byNodeBudget, triggerUIDIndex: byUID}); err != nil {
		return fmt.Errorf("add trigger indexes: %w", err)
	}
	if err := pipelines.AddIndexers(cache.Indexers{pipelineTriggerIndex: byTrigger, pipelineBudgetIndex: byBudgetLabel}); err != nil {
		return fmt.Errorf("add pipeline index: %w", err)
	}
	c.triggerIndexer = triggers.GetIndexer()
	c.triggers = reconcile.NewOverlay(logger, triggers, mutationCacheTTL, false)
	// With adds: a pipeline we created is counted before the informer delivers it.
	c.pipelines = reconcile.NewOverlay(logger, pipelines, mutationCacheTTL, true)
	c.synced = []cache.InformerSynced{triggers.HasSynced, templates.HasSynced, pipelines.HasSynced, budgets.HasSynced}
	return nil
}

// addHandlers queues the triggers that the changes of triggers, templates, NodeBudgets and
// pipelines concern.
func (c *Controller) addHandlers(cfg Config) error {
	triggers, templates, pipelines := cfg.Triggers.Informer(), cfg.Templates.Informer(), cfg.Pipelines.Informer()
	budgets := cfg.NodeBudgets.Informer()
	if _, err := triggers.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: c.onTriggerUpdate,
		DeleteFunc: func(obj any) {
			if tr, ok := tombstoned(obj).(*v1alpha1.PipelineTrigger); ok {
				c.triggers.OnDelete(tr)
			}
			c.enqueue(obj)
		},
	}); err != nil {
		return fmt.Errorf("add trigger event handler: %w", err)
	}
	if _, err := templates.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onTemplate,
		DeleteFunc: c.onTemplate,
	}); err != nil {
		return fmt.Errorf("add template event handler: %w", err)
	}
	if _, err := budgets.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onNodeBudget,
		UpdateFunc: func(_, newObj any) { c.onNodeBudget(newObj) },
		DeleteFunc: c.onNodeBudget,
	}); err != nil {
		return fmt.Errorf("add node budget event handler: %w", err)
	}
	if _, err := pipelines.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.onPipeline,
		UpdateFunc: func(oldObj, newObj any) {
			n, ok := newObj.(*v1alpha1.Pipeline)
			if ok {
				c.pipelines.OnAddOrUpdate(n)
			}
			c.onPipeline(newObj)
			if o, okOld := oldObj.(*v1alpha1.Pipeline); ok && okOld && o.Finished() != n.Finished() {
				c.onBudgetPipeline(n)
			}
		},
		DeleteFunc: func(obj any) {
			if p, ok := tombstoned(obj).(*v1alpha1.Pipeline); ok {
				c.pipelines.OnDelete(p)
				c.onBudgetPipeline(p)
			}
			c.onPipeline(obj)
		},
	}); err != nil {
		return fmt.Errorf("add pipeline event handler: %w", err)
	}
	return nil
}

// watchAccessChanges makes the RBAC changes of informers stale the answers they concern
// (onAccessChange).
func (c *Controller) watchAccessChanges(informers []cache.SharedInformer) error {
	bindings, err := accessreview.NewBindings(informers)
	if err != nil {
		return err
	}
	c.bindings = bindings
	for _, inf := range informers {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			// The initial list is no change: no answer was kept before it.
			AddFunc: func(obj any, initial bool) {
				if !initial {
					c.onAccessChange(nil, obj)
				}
			},
			UpdateFunc: func(oldObj, newObj any) {
				if changed(oldObj, newObj) {
					c.onAccessChange(oldObj, newObj)
				}
			},
			DeleteFunc: func(obj any) { c.onAccessChange(obj, nil) },
		}); err != nil {
			return fmt.Errorf("add RBAC event handler: %w", err)
		}
	}
	return nil
}

// byTriggerLabel indexes a trigger by the value of LabelTrigger on its pipelines.
func byTriggerLabel(obj any) ([]string, error) {
	tr, ok := obj.(*v1alpha1.PipelineTrigger)
	if !ok {
		return nil, nil
	}
	return []string{tr.Namespace + "/" + rules.LabelValueOf(tr.Name)}, nil
}

// byTemplate indexes a trigger by its template.
func byTemplate(obj any) ([]string, error) {
	tr, ok := obj.(*v1alpha1.PipelineTrigger)
	if !ok {
		return nil, nil
	}
	return []string{tr.Namespace + "/" + tr.Spec.TemplateRef.Name}, nil
}

// byNodeBudget indexes a trigger by the NodeBudget it names.
func byNodeBudget(obj any) ([]string, error) {
	tr, ok := obj.(*v1alpha1.PipelineTrigger)
	if !ok || tr.Spec.NodeBudgetRef == nil {
		return nil, nil
	}
	return []string{rules.NodeBudgetLabelOf(tr.Spec.NodeBudgetRef.Name)}, nil
}

// byUID indexes a trigger by its namespace and UID.
func byUID(obj any) ([]string, error) {
	tr, ok := obj.(*v1alpha1.PipelineTrigger)
	if !ok {
		return nil, nil
	}
	return []string{tr.Namespace + "/" + string(tr.UID)}, nil
}

// byBudgetLabel indexes a pipeline by its LabelNodeBudget.
func byBudgetLabel(obj any) ([]string, error) {
	p, ok := obj.(*v1alpha1.Pipeline)
	if !ok {
		return nil, nil
	}
	label, ok := p.Labels[v1alpha1.LabelNodeBudget]
	if !ok {
		return nil, nil
	}
	return []string{label}, nil
}

// byTrigger indexes a pipeline by its LabelTrigger.
func byTrigger(obj any) ([]string, error) {
	p, ok := obj.(*v1alpha1.Pipeline)
	if !ok {
		return nil, nil
	}
	label, ok := p.Labels[v1alpha1.LabelTrigger]
	if !ok {
		return nil, nil
	}
	return []string{p.Namespace + "/" + label}, nil
}

// changed tells whether an update event carries a change, rather than a resync.
func changed(oldObj, newObj any) bool {
	o, errOld := meta.Accessor(oldObj)
	n, errNew := meta.Accessor(newObj)
	return errOld != nil || errNew != nil || o.GetResourceVersion() != n.GetResourceVersion()
}

func tombstoned(obj any) any {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tombstone.Obj
	}
	return obj
}

// enqueue adds the key of a trigger, or of the tombstone of a deleted one.
func (c *Controller) enqueue(obj any) {
	name, err := cache.ObjectToName(tombstoned(obj))
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("enqueue trigger: %w", err))
		return
	}
	c.queue.Add(name)
}

func (c *Controller) enqueueKey(key cache.ObjectName) { c.queue.Add(key) }

// enqueueIndexed adds the triggers found under key in index.
func (c *Controller) enqueueIndexed(index, key string) {
	triggers, err := c.triggerIndexer.ByIndex(index, key)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("find triggers by %s %s: %w", index, key, err))
		return
	}
	for _, tr := range triggers {
		c.enqueue(tr)
	}
}

// onTriggerUpdate queues a trigger whose spec changed, or that is being deleted, and at
// every resync; not for a write of its status (ours) or metadata.
func (c *Controller) onTriggerUpdate(oldObj, newObj any) {
	o, okOld := oldObj.(*v1alpha1.PipelineTrigger)
	n, okNew := newObj.(*v1alpha1.PipelineTrigger)
	if okNew {
		c.triggers.OnAddOrUpdate(n)
	}
	if okOld && okNew && o.ResourceVersion != n.ResourceVersion && o.Generation == n.Generation &&
		o.DeletionTimestamp.Equal(n.DeletionTimestamp) {
		return
	}
	c.enqueue(newObj)
}

// onTemplate queues the triggers of a template that appeared or went.
func (c *Controller) onTemplate(obj any) {
	tpl, ok := tombstoned(obj).(*v1alpha1.PipelineTemplate)
	if !ok {
		return
	}
	c.enqueueIndexed(triggerTemplateIndex, tpl.Namespace+"/"+tpl.Name)
}

// onPipeline queues the trigger of a pipeline that changed: its place in the budget, its
// phase or its blocking may have.
func (c *Controller) onPipeline(obj any) {
	p, ok := tombstoned(obj).(*v1alpha1.Pipeline)
	if !ok {
		return
	}
	if label, ok := p.Labels[v1alpha1.LabelTrigger]; ok {
		c.enqueueIndexed(triggerLabelIndex, p.Namespace+"/"+label)
	}
}

// onNodeBudget queues the triggers naming a NodeBudget that appeared, changed or went.
func (c *Controller) onNodeBudget(obj any) {
	if b, ok := tombstoned(obj).(*v1alpha1.NodeBudget); ok {
		c.enqueueIndexed(triggerBudgetIndex, rules.NodeBudgetLabelOf(b.Name))
	}
}

// onBudgetPipeline queues every trigger naming the NodeBudget of a pipeline that finished
// or went: it freed a place in the budget they share, whichever of them started it. Only
// a start the budget counts frees one: a tenant's pipelines, made and deleted at will,
// queue no other tenant's trigger.
func (c *Controller) onBudgetPipeline(p *v1alpha1.Pipeline) {
	trig := c.budgetTrigger(p.Namespace, types.UID(p.Labels[v1alpha1.LabelTriggerUID]))
	if trig == nil || trig.Spec.NodeBudgetRef == nil || !rules.StartedUnder(trig.Spec.NodeBudgetRef.Name, trig, p) {
		return
	}
	c.enqueueIndexed(triggerBudgetIndex, rules.NodeBudgetLabelOf(trig.Spec.NodeBudgetRef.Name))
}

// Run waits for the caches to sync, then runs workers until ctx is done. The objects'
// informers, started as triggers need them, stop with it.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	c.objects.Run(ctx.Done())
	defer c.objects.Shutdown()
	defer c.queue.ShutDown()

	logger.Info("Waiting for the trigger caches to sync")
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return errors.New("wait for the trigger caches to sync: cancelled")
	}
	logger.Info("Starting trigger workers", "count", workers)
	reconcile.Workers{Queue: c.queue, Kind: "trigger", Sync: c.syncHandler, Panics: c.faults}.Run(ctx, ctx, workers)
	logger.Info("Trigger workers stopped")
	return nil
}
