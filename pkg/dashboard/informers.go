package dashboard

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	informers "github.com/stepwise-dev/stepwise/pkg/generated/informers/externalversions/stepwise/v1alpha1"
	listers "github.com/stepwise-dev/stepwise/pkg/generated/listers/stepwise/v1alpha1"
)

// Kinds as the change stream names them.
const (
	kindPipeline = "Pipeline"
	kindTemplate = "PipelineTemplate"
	kindTrigger  = "PipelineTrigger"
)

// involvedIndex indexes Events by the object they are about: kind/namespace/name.
const involvedIndex = "involvedObject"

// resource is one informer and what Run learned of the user's right to list it.
type resource struct {
	// name is the resource as RBAC names it, for messages.
	name     string
	informer cache.SharedIndexInformer
	// probe lists at most one object: the cheapest way to learn whether the user may list
	// the resource, before an informer would retry a refusal forever.
	probe func(ctx context.Context) error
	// forbidden is the API server's refusal of probe; written before caches.ready closes
	// and read only after.
	forbidden string
}

// caches are the informers the API reads from. Each watches with the user's credentials,
// in the dashboard's namespace or in all.
type caches struct {
	pipelines, templates, triggers resource
	// pipelineEvents and triggerEvents hold the Events about pipelines and triggers: a
	// field selector per kind keeps every other Event of the cluster out.
	pipelineEvents, triggerEvents resource

	pipelineLister listers.PipelineLister
	templateLister listers.PipelineTemplateLister
	triggerLister  listers.PipelineTriggerLister

	// ready closes once the caches are filled, or once Run gave up (err says why).
	ready chan struct{}
	err   error
}

// newCaches builds the informers, each telling onChange of every change after its
// initial list.
func newCaches(client clientset.Interface, kube kubernetes.Interface, namespace string, onChange func(change)) (*caches, error) {
	byNamespace := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	byInvolved := cache.Indexers{involvedIndex: indexByInvolvedObject}
	c := &caches{ready: make(chan struct{})}
	c.pipelines = resource{
		name:     "pipelines",
		informer: informers.NewFilteredPipelineInformer(client, namespace, 0, byNamespace, nil),
		probe: func(ctx context.Context) error {
			_, err := client.StepwiseV1alpha1().Pipelines(namespace).List(ctx, metav1.ListOptions{Limit: 1})
			return err
		},
	}
	c.templates = resource{
		name:     "pipelinetemplates",
		informer: informers.NewFilteredPipelineTemplateInformer(client, namespace, 0, byNamespace, nil),
		probe: func(ctx context.Context) error {
			_, err := client.StepwiseV1alpha1().PipelineTemplates(namespace).List(ctx, metav1.ListOptions{Limit: 1})
			return err
		},
	}
	c.triggers = resource{
		name:     "pipelinetriggers",
		informer: informers.NewFilteredPipelineTriggerInformer(client, namespace, 0, byNamespace, nil),
		probe: func(ctx context.Context) error {
			_, err := client.StepwiseV1alpha1().PipelineTriggers(namespace).List(ctx, metav1.ListOptions{Limit: 1})
			return err
		},
	}
	eventInformer := func(kind string) resource {
		selector := fields.OneTermEqualSelector("involvedObject.kind", kind).String()
		tweak := func(o *metav1.ListOptions) { o.FieldSelector = selector }
		return resource{
			name:     "events",
			informer: coreinformers.NewFilteredEventInformer(kube, namespace, 0, byInvolved, tweak),
			probe: func(ctx context.Context) error {
				_, err := kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{Limit: 1, FieldSelector: selector})
				return err
			},
		}
	}
	c.pipelineEvents = eventInformer(kindPipeline)
	c.triggerEvents = eventInformer(kindTrigger)

	for _, r := range []struct {
		res    *resource
		notify func(any)
	}{
		{&c.pipelines, notifyObject(kindPipeline, onChange)},
		{&c.templates, notifyObject(kindTemplate, onChange)},
		{&c.triggers, notifyObject(kindTrigger, onChange)},
		{&c.pipelineEvents, notifyInvolved(onChange)},
		{&c.triggerEvents, notifyInvolved(onChange)},
	} {
		// The dashboard never shows managedFields, often the larger part of an object.
		if err := r.res.informer.SetTransform(dropManagedFields); err != nil {
			return nil, fmt.Errorf("set the %s informer's transform: %w", r.res.name, err)
		}
		notify := r.notify
		if _, err := r.res.informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			// The initial list is not news: the page loads it by itself.
			AddFunc:    func(obj any, initial bool) { notifyUnlessInitial(notify, obj, initial) },
			UpdateFunc: func(_, obj any) { notify(obj) },
			DeleteFunc: notify,
		}); err != nil {
			return nil, fmt.Errorf("watch %s: %w", r.res.name, err)
		}
	}
	c.pipelineLister = listers.NewPipelineLister(c.pipelines.informer.GetIndexer())
	c.templateLister = listers.NewPipelineTemplateLister(c.templates.informer.GetIndexer())
	c.triggerLister = listers.NewPipelineTriggerLister(c.triggers.informer.GetIndexer())
	return c, nil
}

func notifyUnlessInitial(notify func(any), obj any, initial bool) {
	if !initial {
		notify(obj)
	}
}

func (c *caches) all() []*resource {
	return []*resource{&c.pipelines, &c.templates, &c.triggers, &c.pipelineEvents, &c.triggerEvents}
}

// run probes each resource, starts the informers of those the user may list, closes
// ready once they are synced, and returns when ctx ends and they have stopped.
func (c *caches) run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	for _, r := range c.all() {
		err := r.probe(ctx)
		switch {
		case err == nil:
		case apierrors.IsForbidden(err):
			r.forbidden = apiMessage(err)
			logger.Info("Not allowed to list; the dashboard shows none", "resource", r.name, "reason", r.forbidden)
		case ctx.Err() != nil:
			c.fail(errors.New("the dashboard stopped"))
			return nil
		default:
			err = fmt.Errorf("list %s: %w", r.name, err)
			c.fail(err)
			return err
		}
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	var synced []cache.InformerSynced
	for _, r := range c.all() {
		if r.forbidden != "" {
			continue
		}
		wg.Go(func() { r.informer.RunWithContext(ctx) })
		synced = append(synced, r.informer.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		c.fail(errors.New("the dashboard stopped before its caches were filled"))
		return nil
	}
	logger.V(2).Info("Caches filled")
	close(c.ready)
	<-ctx.Done()
	return nil
}

// fail closes ready with the error every waiting request will answer.
func (c *caches) fail(err error) {
	c.err = err
	close(c.ready)
}

// wait returns once the caches are filled, with the error of a Run that gave up, or
// with ctx's error.
func (c *caches) wait(ctx context.Context) error {
	select {
	case <-c.ready:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// dropManagedFields is the informers' transform.
func dropManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// notifyObject tells onChange of a change of a Pipeline, PipelineTemplate or trigger.
func notifyObject(kind string, onChange func(change)) func(any) {
	return func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if m, err := meta.Accessor(obj); err == nil {
			onChange(change{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()})
		}
	}
}

// notifyInvolved tells onChange of an Event as a change of the object it is about: the
// page then reloads that object, Events included.
func notifyInvolved(onChange func(change)) func(any) {
	return func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if e, ok := obj.(*corev1.Event); ok && aboutStepwise(e) {
			onChange(change{Kind: e.InvolvedObject.Kind, Namespace: e.InvolvedObject.Namespace, Name: e.InvolvedObject.Name})
		}
	}
}

// aboutStepwise tells whether an Event is about an object of ours: another API group may
// have a kind named Pipeline too.
func aboutStepwise(e *corev1.Event) bool {
	gv, err := schema.ParseGroupVersion(e.InvolvedObject.APIVersion)
	return err == nil && gv.Group == v1alpha1.SchemeGroupVersion.Group
}

func involvedKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

func indexByInvolvedObject(obj any) ([]string, error) {
	e, ok := obj.(*corev1.Event)
	if !ok || !aboutStepwise(e) {
		return nil, nil
	}
	return []string{involvedKey(e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name)}, nil
}

// eventsAbout returns the Events about an object from res's cache. uid, when the Event
// has one too, leaves out the Events of an earlier object of the same name.
func eventsAbout(res *resource, kind, namespace, name, uid string) ([]*corev1.Event, error) {
	objs, err := res.informer.GetIndexer().ByIndex(involvedIndex, involvedKey(kind, namespace, name))
	if err != nil {
		return nil, fmt.Errorf("look up the events of %s %s/%s: %w", kind, namespace, name, err)
	}
	events := make([]*corev1.Event, 0, len(objs))
	for _, o := range objs {
		e, ok := o.(*corev1.Event)
		if !ok || (uid != "" && e.InvolvedObject.UID != "" && string(e.InvolvedObject.UID) != uid) {
			continue
		}
		events = append(events, e)
	}
	return events, nil
}
