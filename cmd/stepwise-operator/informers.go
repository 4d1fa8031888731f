package main

import (
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/controller"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/scheme"
	informers "github.com/stepwise-dev/stepwise/pkg/generated/informers/externalversions"
	"github.com/stepwise-dev/stepwise/pkg/lenient"
	"github.com/stepwise-dev/stepwise/pkg/metrics"
)

// undecodable records what the informers of Stepwise's kinds could not decode.
type undecodable struct {
	pipelines, templates, triggers *lenient.Undecodable
}

// useLenientInformers makes factory's informers of the three kinds decode each object
// alone (pkg/lenient): one object a tenant stored that the Go types cannot decode must not
// fail the list and watch of every other, nor keep a restarted operator from syncing. It
// must be called before anything asks the factory for those informers.
//
// onPipelineList is called after each list of pipelines, which lists no resting pipeline:
// those that changed before it are for controller.SweepResting to find.
func useLenientInformers(factory informers.SharedInformerFactory, client versioned.Interface, faults *metrics.Faults, logger klog.Logger,
	onPipelineList func()) *undecodable {
	u := &undecodable{pipelines: lenient.NewUndecodable(), templates: lenient.NewUndecodable(), triggers: lenient.NewUndecodable()}
	config := func(resource string, resync time.Duration, record *lenient.Undecodable) lenient.Config {
		return lenient.Config{
			Client: client.StepwiseV1alpha1().RESTClient(), Resource: resource, Resync: resync,
			ParameterCodec: scheme.ParameterCodec, Undecodable: record, Faults: faults, Logger: logger,
			Transform: controller.TrimForCache,
		}
	}
	factory.InformerFor(&v1alpha1.Pipeline{}, func(_ versioned.Interface, resync time.Duration) cache.SharedIndexInformer {
		whole, resting := pipelineStreams(config("pipelines", resync, u.pipelines))
		informer, _ := lenient.NewMergedInformer[v1alpha1.Pipeline](onPipelineList, whole, resting...)
		return informer
	})
	factory.InformerFor(&v1alpha1.PipelineTemplate{}, func(_ versioned.Interface, resync time.Duration) cache.SharedIndexInformer {
		informer, _ := lenient.NewInformer[v1alpha1.PipelineTemplate](config("pipelinetemplates", resync, u.templates))
		return informer
	})
	factory.InformerFor(&v1alpha1.PipelineTrigger{}, func(_ versioned.Interface, resync time.Duration) cache.SharedIndexInformer {
		informer, _ := lenient.NewInformer[v1alpha1.PipelineTrigger](config("pipelinetriggers", resync, u.triggers))
		return informer
	})
	return u
}

// pipelineStreams are the parts the pipelines' informer lists and watches (a
// lenient.Merged): whole, listed and watched, the pipelines that can still act
// (status.resting empty); watched only, as metadata, the resting ones, a stream for each
// phase they rest in. A resting pipeline is cached (as controller.RestingStandIn) only
// once it changes, so a restart lists no finished pipeline, and the cache holds what can
// act.
func pipelineStreams(whole lenient.Config) (lenient.Config, []lenient.Config) {
	whole.FieldSelector = v1alpha1.FieldResting + "="
	var resting []lenient.Config
	for _, phase := range []v1alpha1.PipelinePhase{v1alpha1.PipelineSucceeded, v1alpha1.PipelineFailed} {
		r := whole
		r.FieldSelector = v1alpha1.FieldResting + "=" + string(phase)
		r.MetadataOnly, r.ListNone = true, true
		r.Transform = controller.RestingStandIn(phase)
		resting = append(resting, r)
	}
	return whole, resting
}
