package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	informers "github.com/stepwise-dev/stepwise/pkg/generated/informers/externalversions"
	"github.com/stepwise-dev/stepwise/pkg/trigger"
)

// The trigger phase's objects, all in the benchmark's namespace. The trigger's name is
// short, so that it is also the value of v1alpha1.LabelTrigger on its pipelines.
const (
	triggerName     = "bench"
	triggerTemplate = "bench-noop"
	triggerSA       = "bench-trigger"
	triggerParam    = "object"
	// triggerSelector labels the ConfigMaps the trigger matches.
	triggerSelectorKey, triggerSelectorValue = "bench-trigger", "yes"
	// triggerResources is the operator's --trigger-resources while the phase runs.
	triggerResources = "configmaps,nodes"
)

// triggerResult is one PipelineTrigger draining a backlog: a pipeline for each of the
// ConfigMaps that exist before it, at most the trigger's concurrency unfinished at a time.
type triggerResult struct {
	Objects     int `json:"objects"`
	Concurrency int `json:"concurrency"`
	Steps       int `json:"steps"`
	// StepSeconds is how long the first step takes (-trigger-step; 0: instant), and
	// IdealDrainSeconds what draining takes at exactly the budget: objects × step ÷
	// concurrency.
	StepSeconds       float64 `json:"stepSeconds,omitempty"`
	IdealDrainSeconds float64 `json:"idealDrainSeconds,omitempty"`
	// DrainSeconds runs from the trigger's create call to the benchmark's watch seeing
	// every pipeline Succeeded and the trigger's status saying so (Succeeded = objects,
	// Running = Waiting = 0). FirstPipelineSeconds and LastSucceededSeconds are the first
	// pipeline seen and the last one seen Succeeded, from the same start; StatusLagSeconds
	// is how long the trigger's status took to catch up with the last pipeline.
	DrainSeconds         float64 `json:"drainSeconds"`
	FirstPipelineSeconds float64 `json:"firstPipelineSeconds"`
	LastSucceededSeconds float64 `json:"lastSucceededSeconds"`
	StatusLagSeconds     float64 `json:"statusLagSeconds"`
	PipelinesPerSec      float64 `json:"pipelinesPerSecond"`
	// MaxUnfinished is the most pipelines of the trigger seen unfinished at once (at most
	// the concurrency); MeanUnfinished is their mean over time, from the first pipeline
	// seen to the last seen Succeeded: how full the trigger kept its budget.
	MaxUnfinished  int     `json:"maxUnfinished"`
	MeanUnfinished float64 `json:"meanUnfinished"`
	// Latency runs from a pipeline seen created to it seen Succeeded.
	Latency percentiles `json:"latency"`
	// Requests per pipeline, as in pipelineRun; pipeline writes include the trigger's
	// creates.
	requestsPerPipeline
	// TriggerStatusWrites are the writes to pipelinetriggers/status, client and server.
	TriggerStatusWrites       float64 `json:"triggerStatusWrites"`
	ServerTriggerStatusWrites float64 `json:"serverTriggerStatusWrites"`
	Conflicts                 float64 `json:"conflicts"`
	// Reads are the operator's GET and LIST requests in the phase; the ConfigMap
	// informer, started when the first trigger on the kind may act, fills its cache with
	// a streaming watch rather than a LIST.
	Reads                 map[string]float64 `json:"reads,omitempty"`
	ReconcilesPerPipeline float64            `json:"reconcilesPerPipeline"`
	// TriggerReconciles are the trigger controller's syncs (its own workqueue).
	TriggerReconciles  float64 `json:"triggerReconciles"`
	CPUSeconds         float64 `json:"cpuSeconds"`
	CPUMsPerPipeline   float64 `json:"cpuMsPerPipeline"`
	RSSMiB             float64 `json:"rssMiB"`
	PeakRSSMiB         float64 `json:"peakRssMiB"`
	PeakRSSIsPhasePeak bool    `json:"peakRssIsPhasePeak"`
	// Status is the trigger's status at the end.
	Status v1alpha1.PipelineTriggerStatus `json:"status"`
}

// triggerPhase creates the ConfigMaps, then a trigger on them, and measures the operator
// running a pipeline for each, at most the concurrency at a time. The trigger and the
// ConfigMaps are deleted at the end (a trigger left would ask for SubjectAccessReviews
// every minute in the idle and restart phases); its pipelines stay, finished, for the
// idle phase.
func (b *bench) triggerPhase(ctx context.Context) error {
	n, c := b.cfg.triggerObjects, b.cfg.triggerConcurrency
	r := &triggerResult{Objects: n, Concurrency: c, Steps: b.cfg.k, StepSeconds: b.cfg.triggerStep.Seconds(),
		IdealDrainSeconds: float64(n) * b.cfg.triggerStep.Seconds() / float64(c)}
	b.res.Trigger = r
	if err := b.setUpTrigger(ctx); err != nil {
		return err
	}
	// The previous phase's Events are written asynchronously: wait for them.
	if _, err := b.probe.settle(ctx, 3*time.Minute); err != nil {
		return fmt.Errorf("trigger phase: %w", err)
	}
	r.PeakRSSIsPhasePeak = resetPeak(b.op.pid)
	before, err := b.probe.snapshot(ctx)
	if err != nil {
		return err
	}
	cpuBefore, err := cpuSeconds(b.op.pid)
	if err != nil {
		return err
	}
	syncsBefore, err := b.triggerReconciles(ctx)
	if err != nil {
		return err
	}

	// A deadline that only a broken run misses: at least 5 pipelines a second.
	drainCtx, cancel := context.WithTimeout(ctx, 2*time.Minute+time.Duration(n)*200*time.Millisecond+
		2*time.Duration(n)*b.cfg.triggerStep/time.Duration(c))
	defer cancel()
	w, err := watchTrigger(drainCtx, b.client, namespace, triggerName, n, c)
	if err != nil {
		return err
	}
	w.start = time.Now()
	if _, err := b.client.StepwiseV1alpha1().PipelineTriggers(namespace).Create(drainCtx,
		benchTrigger(c), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create trigger %s: %w", triggerName, err)
	}
	werr := w.wait(drainCtx)
	w.fill(r)
	cancel() // the watch has seen what it waited for
	if werr != nil {
		return fmt.Errorf("trigger phase: %w", werr)
	}

	after, err := b.probe.settle(ctx, 3*time.Minute)
	if err != nil {
		return fmt.Errorf("trigger phase: %w", err)
	}
	cpuAfter, err := cpuSeconds(b.op.pid)
	if err != nil {
		return err
	}
	syncsAfter, err := b.triggerReconciles(ctx)
	if err != nil {
		return err
	}
	st, err := readProcStatus(b.op.pid)
	if err != nil {
		return err
	}
	d := between(before, after)
	fn := float64(n)
	r.requestsPerPipeline = perPipelineOf(d, fn)
	r.TriggerStatusWrites = count(d.operator, onSubresource("pipelinetriggers/status", isWrite))
	r.ServerTriggerStatusWrites = count(d.server, onSubresource("pipelinetriggers/status", isWrite))
	r.Conflicts = d.conflicts
	r.Reads = filter(d.operator, isRead)
	r.ReconcilesPerPipeline = d.reconciles / fn
	r.TriggerReconciles = syncsAfter - syncsBefore
	r.CPUSeconds = cpuAfter - cpuBefore
	r.CPUMsPerPipeline = r.CPUSeconds / fn * 1000
	r.RSSMiB = mib(st.RSSBytes)
	r.PeakRSSMiB = mib(st.PeakBytes)

	return b.tearDownTrigger(ctx)
}

// triggerReconciles reads how many syncs the trigger controller has done.
func (b *bench) triggerReconciles(ctx context.Context) (float64, error) {
	om, err := b.op.scrape(ctx)
	if err != nil {
		return 0, err
	}
	return om.sum("workqueue_work_duration_seconds_count", map[string]string{"name": trigger.ControllerName}), nil
}

// onSubresource keeps the keys of one "resource/subresource" that pass keep.
func onSubresource(resource string, keep func(string) bool) func(string) bool {
	return func(k string) bool {
		_, res, _ := strings.Cut(k, " ")
		return res == resource && keep(k)
	}
}

// setUpTrigger creates what the trigger needs before it exists: its ServiceAccount, allowed
// to list and watch ConfigMaps in the namespace (the trigger controller asks with a
// SubjectAccessReview; test.noop needs no rights), the template, and the ConfigMaps.
func (b *bench) setUpTrigger(ctx context.Context) error {
	admin := b.cluster.Client
	objMeta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: namespace} }
	if _, err := admin.CoreV1().ServiceAccounts(namespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: objMeta(triggerSA)}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create service account %s: %w", triggerSA, err)
	}
	if _, err := admin.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{
		ObjectMeta: objMeta(triggerSA),
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create role %s: %w", triggerSA, err)
	}
	if _, err := admin.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: objMeta(triggerSA),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: triggerSA},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: triggerSA, Namespace: namespace}},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create role binding %s: %w", triggerSA, err)
	}
	if _, err := b.client.StepwiseV1alpha1().PipelineTemplates(namespace).Create(ctx,
		benchTemplate(b.cfg.k, b.cfg.triggerStep), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create template %s: %w", triggerTemplate, err)
	}
	logf("Trigger: creating %d ConfigMaps", b.cfg.triggerObjects)
	return createConfigMaps(ctx, b.cluster.Config, names("trigger", 0, b.cfg.triggerObjects), b.cfg.creators)
}

// tearDownTrigger deletes the trigger first (its pipelines stay; deleting its objects
// while it exists would make it prune their pipelines to its history limit), then the
// ConfigMaps, which the operator's informer would otherwise keep in memory, and the rest.
func (b *bench) tearDownTrigger(ctx context.Context) error {
	sw := b.client.StepwiseV1alpha1()
	core, rbac := b.cluster.Client.CoreV1(), b.cluster.Client.RbacV1()
	if err := sw.PipelineTriggers(namespace).Delete(ctx, triggerName, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete trigger %s: %w", triggerName, err)
	}
	if err := core.ConfigMaps(namespace).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: triggerSelectorKey + "=" + triggerSelectorValue}); err != nil {
		return fmt.Errorf("delete the trigger's configmaps: %w", err)
	}
	return errors.Join(
		wrap("delete template", sw.PipelineTemplates(namespace).Delete(ctx, triggerTemplate, metav1.DeleteOptions{})),
		wrap("delete role binding", rbac.RoleBindings(namespace).Delete(ctx, triggerSA, metav1.DeleteOptions{})),
		wrap("delete role", rbac.Roles(namespace).Delete(ctx, triggerSA, metav1.DeleteOptions{})),
		wrap("delete service account", core.ServiceAccounts(namespace).Delete(ctx, triggerSA, metav1.DeleteOptions{})),
	)
}

func wrap(what string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// benchTemplate is k test.noop steps with one declared param, which the trigger gives; with
// a step duration, the first is a test.wait of that duration.
func benchTemplate(k int, step time.Duration) *v1alpha1.PipelineTemplate {
	t := &v1alpha1.PipelineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: triggerTemplate, Namespace: namespace},
		Spec:       v1alpha1.PipelineTemplateSpec{Params: []v1alpha1.TemplateParam{{Name: triggerParam, Required: true}}},
	}
	for i := range k {
		s := v1alpha1.Step{Name: fmt.Sprintf("s%d", i), Executor: "test.noop"}
		if i == 0 && step > 0 {
			s.Executor, s.With = "test.wait", map[string]string{"duration": step.String()}
		}
		t.Spec.Steps = append(t.Spec.Steps, s)
	}
	return t
}

// benchTrigger runs the template for every labelled ConfigMap of the namespace.
func benchTrigger(concurrency int) *v1alpha1.PipelineTrigger {
	return &v1alpha1.PipelineTrigger{
		ObjectMeta: metav1.ObjectMeta{Name: triggerName, Namespace: namespace},
		Spec: v1alpha1.PipelineTriggerSpec{
			Resource:           v1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"},
			Selector:           &v1alpha1.LabelSelector{MatchLabels: map[string]string{triggerSelectorKey: triggerSelectorValue}},
			TemplateRef:        v1alpha1.TemplateRef{Name: triggerTemplate},
			Params:             map[string]string{triggerParam: "$(object.metadata.name)"},
			ServiceAccountName: triggerSA,
			Concurrency:        int32(concurrency),
			WhenUnmatched:      v1alpha1.UnmatchedKeep,
		},
	}
}

// createConfigMaps creates the named ConfigMaps, labelled for the trigger, from creators
// goroutines with an unthrottled client.
func createConfigMaps(ctx context.Context, base *rest.Config, names []string, creators int) error {
	kube, err := unthrottledClient(base)
	if err != nil {
		return err
	}
	err = forEach(ctx, len(names), creators, func(ctx context.Context, i int) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: names[i], Namespace: namespace, Labels: map[string]string{triggerSelectorKey: triggerSelectorValue},
		}}
		if _, err := kube.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create configmap %s: %w", names[i], err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create configmaps: %w", err)
	}
	return nil
}

// triggerWatch follows one trigger's pipelines (by v1alpha1.LabelTrigger) and the trigger
// itself through the benchmark's informers: a watch sees the pipelines' states in the
// order the API server wrote them, so the count of unfinished ones it sees is one the
// cluster had.
type triggerWatch struct {
	objects, concurrency int
	start                time.Time
	// end is closed once every pipeline is seen Succeeded and the trigger's status says
	// so, or once something went wrong (err).
	end chan struct{}

	mu            sync.Mutex
	err           error
	done          time.Time
	created       map[string]time.Time // first seen
	succeeded     map[string]time.Time // first seen Succeeded
	unfinished    map[string]bool
	maxUnfinished int
	// area is the sum of unfinished × seconds, since the first pipeline, until lastChange.
	area       float64
	first      time.Time
	lastChange time.Time
	status     v1alpha1.PipelineTriggerStatus
}

// watchTrigger starts informers on the trigger's pipelines and on the trigger, which stop
// with ctx, and waits for their (empty) caches to sync.
func watchTrigger(ctx context.Context, client clientset.Interface, ns, name string, objects, concurrency int) (*triggerWatch, error) {
	w := &triggerWatch{
		objects: objects, concurrency: concurrency, end: make(chan struct{}),
		created: map[string]time.Time{}, succeeded: map[string]time.Time{}, unfinished: map[string]bool{},
	}
	pipelines := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = v1alpha1.LabelTrigger + "=" + name }))
	triggers := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + name }))
	pInf := pipelines.Stepwise().V1alpha1().Pipelines().Informer()
	tInf := triggers.Stepwise().V1alpha1().PipelineTriggers().Informer()
	if _, err := pInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.observePipeline,
		UpdateFunc: func(_, obj any) { w.observePipeline(obj) },
		DeleteFunc: func(obj any) { w.fail(fmt.Errorf("a pipeline of trigger %s was deleted", name)) },
	}); err != nil {
		return nil, fmt.Errorf("add trigger pipeline handler: %w", err)
	}
	if _, err := tInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.observeTrigger,
		UpdateFunc: func(_, obj any) { w.observeTrigger(obj) },
	}); err != nil {
		return nil, fmt.Errorf("add trigger handler: %w", err)
	}
	pipelines.Start(ctx.Done())
	triggers.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), pInf.HasSynced, tInf.HasSynced) {
		return nil, errors.New("wait for the benchmark's trigger caches to sync: timed out")
	}
	return w, nil
}

func (w *triggerWatch) observePipeline(obj any) {
	p, ok := obj.(*v1alpha1.Pipeline)
	if !ok {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, seen := w.created[p.Name]; !seen {
		w.created[p.Name] = now
		if w.first.IsZero() {
			w.first, w.lastChange = now, now
		}
	}
	if p.Status.Phase == v1alpha1.PipelineFailed {
		w.failLocked(fmt.Errorf("pipeline %s failed", p.Name))
		return
	}
	// As the trigger counts (pkg/trigger finished): Succeeded for the current spec.
	finished := p.Status.Phase == v1alpha1.PipelineSucceeded && p.Status.ObservedGeneration >= p.Generation && p.DeletionTimestamp == nil
	if finished == !w.unfinished[p.Name] {
		return
	}
	w.area += float64(len(w.unfinished)) * now.Sub(w.lastChange).Seconds()
	w.lastChange = now
	if finished {
		delete(w.unfinished, p.Name)
		if _, ok := w.succeeded[p.Name]; !ok {
			w.succeeded[p.Name] = now
		}
	} else {
		w.unfinished[p.Name] = true
		w.maxUnfinished = max(w.maxUnfinished, len(w.unfinished))
		if len(w.unfinished) > w.concurrency {
			w.failLocked(fmt.Errorf("%d pipelines of the trigger unfinished at once, more than its concurrency %d", len(w.unfinished), w.concurrency))
			return
		}
	}
	w.checkLocked(now)
}

func (w *triggerWatch) observeTrigger(obj any) {
	t, ok := obj.(*v1alpha1.PipelineTrigger)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.status = *t.Status.DeepCopy()
	w.checkLocked(time.Now())
}

// checkLocked ends the watch once every pipeline succeeded and the status says so.
func (w *triggerWatch) checkLocked(now time.Time) {
	s, n := w.status, int32(w.objects)
	if len(w.succeeded) < w.objects || s.Succeeded != n || s.Matched != n || s.Running != 0 || s.Waiting != 0 || s.Failed != 0 {
		return
	}
	if w.done.IsZero() && w.err == nil {
		w.done = now
		close(w.end)
	}
}

func (w *triggerWatch) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failLocked(err)
}

func (w *triggerWatch) failLocked(err error) {
	if w.err == nil && w.done.IsZero() {
		w.err = err
		close(w.end)
	}
}

// wait waits until the trigger drained its objects, something went wrong, or ctx ends.
func (w *triggerWatch) wait(ctx context.Context) error {
	select {
	case <-w.end:
	case <-ctx.Done():
		w.mu.Lock()
		defer w.mu.Unlock()
		s := w.status
		return fmt.Errorf("wait for trigger %s to drain (%d of %d pipelines seen Succeeded; status matched %d, running %d, waiting %d, succeeded %d, failed %d): %w",
			triggerName, len(w.succeeded), w.objects, s.Matched, s.Running, s.Waiting, s.Succeeded, s.Failed, ctx.Err())
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// fill puts what the watch saw into r.
func (w *triggerWatch) fill(r *triggerResult) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r.MaxUnfinished = w.maxUnfinished
	r.Status = w.status
	var last time.Time
	var lat []time.Duration
	for name, at := range w.succeeded {
		last = maxTime(last, at)
		lat = append(lat, at.Sub(w.created[name]))
	}
	r.Latency = percentilesOf(lat)
	if !w.first.IsZero() {
		r.FirstPipelineSeconds = w.first.Sub(w.start).Seconds()
	}
	if !last.IsZero() {
		r.LastSucceededSeconds = last.Sub(w.start).Seconds()
		if span := last.Sub(w.first).Seconds(); span > 0 {
			r.MeanUnfinished = w.area / span
		}
	}
	if !w.done.IsZero() {
		r.DrainSeconds = w.done.Sub(w.start).Seconds()
		r.StatusLagSeconds = w.done.Sub(last).Seconds()
		r.PipelinesPerSec = float64(w.objects) / r.DrainSeconds
	}
}

// logf logs a line with the time, as run does.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
