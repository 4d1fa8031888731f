package main

import (
	"context"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	informers "github.com/stepwise-dev/stepwise/pkg/generated/informers/externalversions"
	"github.com/stepwise-dev/stepwise/tasks/node"
)

// startDrainRules starts the informer of the cluster's DrainRules for the life of the
// process, on every replica, since executors are registered before a replica leads:
// node.drain reads the rules from its lister, and waits until it has synced.
func startDrainRules(ctx context.Context, client versioned.Interface, resync time.Duration) *node.DrainRules {
	factory := informers.NewSharedInformerFactory(client, resync)
	inf := factory.Stepwise().V1alpha1().DrainRules()
	rules := &node.DrainRules{Lister: inf.Lister(), Synced: inf.Informer().HasSynced}
	factory.Start(ctx.Done())
	return rules
}
