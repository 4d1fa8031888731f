package trigger

import (
	"fmt"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// onAccessChange handles a change of an RBAC object, from oldObj to newObj (nil when it
// was added, or deleted). It makes stale the kept answers of the triggers whose
// ServiceAccount the change may give or take rights, and looks at those triggers again
// shortly: a tenant who may edit RBAC in its namespace then costs the reviews of its own
// triggers only, however often it edits. A change it cannot attribute makes every answer
// stale, rate-limited.
func (c *Controller) onAccessChange(oldObj, newObj any) {
	keys, attributed := c.concernedTriggers(oldObj, newObj)
	if !attributed {
		c.onUnattributedAccessChange()
		return
	}
	if len(keys) == 0 {
		return
	}
	c.access.answers.InvalidateKeys(keys)
	for _, key := range keys {
		c.queue.AddAfter(key, accessChangeDelay)
	}
}

// onUnattributedAccessChange makes every kept answer stale, as often as the answers'
// cache allows, and queues every trigger for when it does.
func (c *Controller) onUnattributedAccessChange() {
	delay, queue := c.access.answers.InvalidateAll()
	if !queue {
		return
	}
	for _, key := range c.triggerIndexer.ListKeys() {
		name, err := cache.ParseObjectName(key)
		if err != nil {
			utilruntime.HandleError(fmt.Errorf("enqueue trigger %q: %w", key, err))
			continue
		}
		c.queue.AddAfter(name, max(delay, accessChangeDelay))
	}
}

// concernedTriggers lists the triggers whose rights the change of an RBAC object (its old
// and new state, either nil) may change (accessreview.Bindings.Attribute), and tells
// whether it could attribute the change.
func (c *Controller) concernedTriggers(objs ...any) ([]cache.ObjectName, bool) {
	change, attributed := c.bindings.Attribute(objs...)
	if !attributed || change.None() {
		return nil, attributed
	}
	var keys []cache.ObjectName
	for _, item := range c.triggerIndexer.List() {
		if trig, ok := item.(*v1alpha1.PipelineTrigger); ok && change.Concerns(serviceAccountOf(trig)) {
			keys = append(keys, cache.MetaObjectToName(trig))
		}
	}
	return keys, true
}
