package main

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/executor"
	informers "github.com/stepwise-dev/stepwise/pkg/generated/informers/externalversions"
	"github.com/stepwise-dev/stepwise/pkg/lenient"
	"github.com/stepwise-dev/stepwise/pkg/metrics"
	"github.com/stepwise-dev/stepwise/pkg/trigger"
)

// rbacResources are the kinds whose changes may change what a trigger's ServiceAccount may
// list and watch.
func rbacResources() []schema.GroupVersionResource {
	return []schema.GroupVersionResource{
		rbacv1.SchemeGroupVersion.WithResource("roles"),
		rbacv1.SchemeGroupVersion.WithResource("rolebindings"),
		rbacv1.SchemeGroupVersion.WithResource("clusterroles"),
		rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"),
	}
}

// newTriggers makes the PipelineTrigger controller on the engine's informer factory (it
// adds the trigger and template informers to it, so it must come before the factory
// starts), RESTMapper and the factory of RBAC metadata informers (it adds the RBAC
// informers, which tell it rights changed).
func (e *engine) newTriggers(ctx context.Context, factory informers.SharedInformerFactory, rbac metadatainformer.SharedInformerFactory,
	mapper meta.RESTMapper, clients executor.ClientProvider, queueMetrics workqueue.MetricsProvider,
	faults *metrics.Faults, undecodable lenient.DecodeErrors) (*trigger.Controller, error) {
	resources, err := trigger.ParseResources(e.opts.triggerResources)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(e.clients.config)
	if err != nil {
		return nil, fmt.Errorf("create dynamic client: %w", err)
	}
	sw := factory.Stepwise().V1alpha1()
	var accessChanges []cache.SharedInformer
	for _, gvr := range rbacResources() {
		accessChanges = append(accessChanges, rbac.ForResource(gvr).Informer())
	}
	return trigger.New(ctx, trigger.Config{
		Client:              e.clients.stepwise,
		Kube:                e.clients.kube,
		Clients:             clients,
		Dynamic:             dyn,
		Mapper:              mapper,
		Triggers:            sw.PipelineTriggers(),
		Templates:           sw.PipelineTemplates(),
		Pipelines:           sw.Pipelines(),
		Resources:           resources,
		Recorder:            e.recorder,
		Resync:              e.opts.resync,
		AccessChanges:       accessChanges,
		WorkqueueMetrics:    queueMetrics,
		Faults:              faults,
		UndecodableTriggers: undecodable,
	})
}

// runTriggers runs the trigger controller in the background until ctx or lead ends: it
// starts pipelines, which only the leader may do, and stops at once on SIGTERM (no hook of
// its own needs the grace period). The function it returns stops it and waits until it has.
func (e *engine) runTriggers(ctx, lead context.Context, c *trigger.Controller) func() {
	runCtx, cancel := context.WithCancel(lead)
	stopWithCtx := context.AfterFunc(ctx, cancel)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Run(runCtx, e.opts.triggerWorkers); err != nil && runCtx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Trigger controller stopped")
		}
	}()
	return func() {
		stopWithCtx()
		cancel()
		<-done
	}
}

// newRBACInformers makes the factory of the RBAC informers the trigger controller listens
// to. It keeps only what tells a change (names and resourceVersions): the rules are never
// read, the API server's SubjectAccessReview answers with them.
func (e *engine) newRBACInformers() (metadatainformer.SharedInformerFactory, error) {
	client, err := metadata.NewForConfig(e.clients.config)
	if err != nil {
		return nil, fmt.Errorf("create metadata client: %w", err)
	}
	return metadatainformer.NewSharedInformerFactoryWithOptions(client, e.opts.resync,
		metadatainformer.WithTransform(trimToName)), nil
}

// trimToName keeps of an object's metadata its name, namespace, UID and resourceVersion.
func trimToName(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
	}}, nil
}
