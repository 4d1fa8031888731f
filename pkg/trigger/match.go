package trigger

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// match reads the objects of the trigger's kind in its scope (the trigger's namespace for
// a namespaced kind, the cluster for a cluster-scoped one) from the informer, and keeps
// those the matcher matches, in the order of matching (rules.CompareObjects). This is the
// order the waiting objects start in, and the order of status.queue. An object being
// deleted counts as gone; a Pipeline a trigger made is none (rules.Eligible).
func (ts *triggerSync) match(lister cache.GenericLister, matcher *rules.Matcher) error {
	var list []runtime.Object
	var err error
	if ts.target.namespaced {
		list, err = lister.ByNamespace(ts.trig.Namespace).List(labels.Everything())
	} else {
		list, err = lister.List(labels.Everything())
	}
	if err != nil {
		return fmt.Errorf("list %s from cache: %w", ts.target.gvr.GroupResource(), err)
	}
	for _, item := range list {
		obj, ok := item.(*unstructured.Unstructured)
		if !ok || !rules.Eligible(ts.target.gvr.GroupResource(), obj) {
			continue
		}
		ts.present[obj.GetUID()] = obj
		if matcher.Matches(obj) {
			ts.objects = append(ts.objects, obj)
		}
	}
	slices.SortFunc(ts.objects, rules.CompareObjects)
	return nil
}
