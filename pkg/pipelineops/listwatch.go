package pipelineops

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
)

// PipelineListWatch lists and watches the pipelines of namespace ns that the list options
// select once set has changed them (a label or a field selector), for an informer or
// watchtools.UntilWithSync. It lets the reflector ask the clientset whether it can stream
// the initial list over the watch (fakes cannot), as generated informers do.
func PipelineListWatch(cs clientset.Interface, ns string, set func(*metav1.ListOptions)) cache.ListerWatcher {
	client := cs.StepwiseV1alpha1().Pipelines(ns)
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			set(&opts)
			return client.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			set(&opts)
			return client.Watch(ctx, opts)
		},
	}, cs)
}
