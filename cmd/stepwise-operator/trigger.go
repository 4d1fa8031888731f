package main

import (
	"context"
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/accessreview"
	"github.com/stepwise-dev/stepwise/pkg/egress"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	informers "github.com/stepwise-dev/stepwise/pkg/generated/informers/externalversions"
	"github.com/stepwise-dev/stepwise/pkg/lenient"
	"github.com/stepwise-dev/stepwise/pkg/metrics"
	"github.com/stepwise-dev/stepwise/pkg/trigger"
)

// newTriggers makes the PipelineTrigger controller on the engine's informer factory (it
// adds the trigger and template informers to it, so it must come before the factory
// starts), RESTMapper and the factory of RBAC informers (it adds the RBAC informers,
// which tell it whose rights changed).
func (e *engine) newTriggers(ctx context.Context, factory informers.SharedInformerFactory, rbac kubeinformers.SharedInformerFactory,
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
	rbacV1 := rbac.Rbac().V1()
	accessChanges := []cache.SharedInformer{
		rbacV1.Roles().Informer(), rbacV1.RoleBindings().Informer(),
		rbacV1.ClusterRoles().Informer(), rbacV1.ClusterRoleBindings().Informer(),
	}
	gatePolicy, err := e.opts.gatePolicy()
	if err != nil {
		return nil, err
	}
	gateURLs, err := e.opts.gatePrometheusURLs()
	if err != nil {
		return nil, fmt.Errorf("--gate-prometheus-url-for: %w", err)
	}
	operator, err := whoAmI(ctx, e.clients.kube)
	if err != nil {
		// Adoption is for pipelines of versions before the trigger's UID label: without
		// it, those are left alone, and everything else works.
		klog.FromContext(ctx).Error(err, "Pipelines of earlier versions without their trigger's UID will not be adopted")
	}
	// The admin's Prometheus URLs are where the admin chose: no address is refused.
	anywhere := egress.New(netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0"))
	return trigger.New(ctx, trigger.Config{
		Client:              e.clients.stepwise,
		Operator:            operator,
		Kube:                e.clients.kube,
		Clients:             clients,
		Dynamic:             dyn,
		Mapper:              mapper,
		Triggers:            sw.PipelineTriggers(),
		Templates:           sw.PipelineTemplates(),
		Pipelines:           sw.Pipelines(),
		NodeBudgets:         sw.NodeBudgets(),
		Workers:             e.opts.triggerWorkers,
		GateHTTP:            egress.Client(gatePolicy),
		GatePrometheusURLs:  gateURLs,
		GateAdminHTTP:       egress.Client(anywhere),
		Resources:           resources,
		Recorder:            e.recorder,
		Resync:              e.opts.resync,
		AccessChanges:       accessChanges,
		WorkqueueMetrics:    queueMetrics,
		Faults:              faults,
		UndecodableTriggers: undecodable,
		Archiving:           e.archive != nil,
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
// to. They keep of each object what tells a change and whom it concerns (a binding's
// roleRef and subjects), never the rules: the API server's SubjectAccessReview answers
// with those.
func (e *engine) newRBACInformers() kubeinformers.SharedInformerFactory {
	return kubeinformers.NewSharedInformerFactoryWithOptions(e.clients.kube, e.opts.resync,
		kubeinformers.WithTransform(accessreview.TrimRBAC))
}
