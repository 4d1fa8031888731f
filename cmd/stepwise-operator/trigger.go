package main

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	informers "github.com/stepwise-dev/stepwise/pkg/generated/informers/externalversions"
	"github.com/stepwise-dev/stepwise/pkg/trigger"
)

// newTriggers makes the PipelineTrigger controller on the engine's informer factory (it
// adds the trigger and template informers to it, so it must come before the factory
// starts) and RESTMapper.
func (e *engine) newTriggers(ctx context.Context, factory informers.SharedInformerFactory, mapper meta.RESTMapper,
	queueMetrics workqueue.MetricsProvider) (*trigger.Controller, error) {
	resources, err := trigger.ParseResources(e.opts.triggerResources)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(e.clients.config)
	if err != nil {
		return nil, fmt.Errorf("create dynamic client: %w", err)
	}
	sw := factory.Stepwise().V1alpha1()
	return trigger.New(ctx, trigger.Config{
		Client:           e.clients.stepwise,
		Kube:             e.clients.kube,
		Dynamic:          dyn,
		Mapper:           mapper,
		Triggers:         sw.PipelineTriggers(),
		Templates:        sw.PipelineTemplates(),
		Pipelines:        sw.Pipelines(),
		Resources:        resources,
		Recorder:         e.recorder,
		Resync:           e.opts.resync,
		WorkqueueMetrics: queueMetrics,
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
