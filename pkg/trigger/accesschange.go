package trigger

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

const (
	// bindingRoleIndex: RoleBindings and ClusterRoleBindings by the role they refer to
	// (roleKey), on the RBAC informers.
	bindingRoleIndex = "stepwise.dev/binding-role"

	// globalAccessChangeInterval bounds how often an RBAC change that cannot be attributed
	// makes every trigger's answer stale (see accessChecker.invalidateAll).
	globalAccessChangeInterval = 5 * time.Second
)

// binding is what of a RoleBinding or ClusterRoleBinding says whom it grants rights, and
// where.
type binding struct {
	// namespace is a RoleBinding's; empty for a ClusterRoleBinding.
	namespace string
	subjects  []rbacv1.Subject
}

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
	c.access.invalidateKeys(keys)
	for _, key := range keys {
		c.queue.AddAfter(key, accessChangeDelay)
	}
}

// onUnattributedAccessChange makes every kept answer stale, as often as the accessChecker
// allows, and queues every trigger for when it does.
func (c *Controller) onUnattributedAccessChange() {
	delay, queue := c.access.invalidateAll()
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
// and new state, either nil) may change, and tells whether it could attribute the change.
//
// A binding concerns the triggers whose ServiceAccount one of its subjects names; a
// RoleBinding only those of its namespace, as it grants rights in its namespace only, and a
// trigger's review asks for its own namespace (or the cluster, which no RoleBinding
// grants). A Role or ClusterRole concerns what the bindings that refer to it concern, as
// the binding informers hold them: its rules are not read, the API server's review reads
// them. A ClusterRole aggregated into another changes the other's rules too; the
// aggregation controller writes those, and that change is attributed in turn.
//
// What cannot be attributed: an object of another type (an informer that keeps only
// metadata has no subjects or roleRef to read), and a role while the binding informers
// have not synced or there are none.
func (c *Controller) concernedTriggers(objs ...any) ([]cache.ObjectName, bool) {
	var bindings []binding
	for _, obj := range objs {
		if obj == nil {
			continue
		}
		switch o := tombstoned(obj).(type) {
		case *rbacv1.RoleBinding:
			bindings = append(bindings, binding{namespace: o.Namespace, subjects: o.Subjects})
		case *rbacv1.ClusterRoleBinding:
			bindings = append(bindings, binding{subjects: o.Subjects})
		case *rbacv1.Role:
			found, ok := c.bindingsOf(roleKey(o.Namespace, rbacv1.RoleRef{Kind: "Role", Name: o.Name}))
			if !ok {
				return nil, false
			}
			bindings = append(bindings, found...)
		case *rbacv1.ClusterRole:
			found, ok := c.bindingsOf(roleKey("", rbacv1.RoleRef{Kind: "ClusterRole", Name: o.Name}))
			if !ok {
				return nil, false
			}
			bindings = append(bindings, found...)
		default:
			return nil, false
		}
	}
	if len(bindings) == 0 {
		return nil, true
	}
	var keys []cache.ObjectName
	for _, item := range c.triggerIndexer.List() {
		trig, ok := item.(*v1alpha1.PipelineTrigger)
		if !ok {
			continue
		}
		sa := serviceAccountOf(trig)
		if slices.ContainsFunc(bindings, func(b binding) bool { return b.grants(trig.Namespace, sa) }) {
			keys = append(keys, cache.MetaObjectToName(trig))
		}
	}
	return keys, true
}

// bindingsOf lists the bindings that refer to a role (roleKey); false when the binding
// informers cannot tell.
func (c *Controller) bindingsOf(role string) ([]binding, bool) {
	if len(c.bindingIndexers) == 0 {
		return nil, false
	}
	for _, synced := range c.accessSynced {
		if !synced() {
			return nil, false
		}
	}
	var out []binding
	for _, indexer := range c.bindingIndexers {
		items, err := indexer.ByIndex(bindingRoleIndex, role)
		if err != nil {
			utilruntime.HandleError(fmt.Errorf("find the bindings of %s: %w", role, err))
			return nil, false
		}
		for _, item := range items {
			switch b := item.(type) {
			case *rbacv1.RoleBinding:
				out = append(out, binding{namespace: b.Namespace, subjects: b.Subjects})
			case *rbacv1.ClusterRoleBinding:
				out = append(out, binding{subjects: b.Subjects})
			}
		}
	}
	return out, true
}

// grants tells whether the binding may give the ServiceAccount ns/sa rights that its
// trigger's review asks about: a RoleBinding of another namespace grants none.
func (b binding) grants(ns, sa string) bool {
	if b.namespace != "" && b.namespace != ns {
		return false
	}
	return slices.ContainsFunc(b.subjects, func(s rbacv1.Subject) bool { return isServiceAccount(s, b.namespace, ns, sa) })
}

// isServiceAccount tells whether a subject of a binding of namespace bindingNS (empty for a
// ClusterRoleBinding) is the ServiceAccount ns/sa as the API server authorizes it: as a
// ServiceAccount (whose namespace a RoleBinding may leave out: its own), as its user name,
// or as one of its groups (the ones the review gives it).
func isServiceAccount(s rbacv1.Subject, bindingNS, ns, sa string) bool {
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		return cmp.Or(s.Namespace, bindingNS) == ns && s.Name == sa
	case rbacv1.UserKind:
		return s.Name == serviceAccountUser(ns, sa)
	case rbacv1.GroupKind:
		return slices.Contains(serviceAccountGroups(ns), s.Name)
	}
	return false
}

// byRoleRef indexes a RoleBinding or ClusterRoleBinding by the role it refers to.
func byRoleRef(obj any) ([]string, error) {
	switch b := obj.(type) {
	case *rbacv1.RoleBinding:
		return []string{roleKey(b.Namespace, b.RoleRef)}, nil
	case *rbacv1.ClusterRoleBinding:
		return []string{roleKey("", b.RoleRef)}, nil
	}
	return nil, nil
}

// roleKey names the role a binding of namespace ns (empty for a ClusterRoleBinding) refers
// to: ClusterRole/NAME, or Role/NAMESPACE/NAME.
func roleKey(ns string, ref rbacv1.RoleRef) string {
	if ref.Kind == "ClusterRole" {
		return "ClusterRole/" + ref.Name
	}
	return "Role/" + ns + "/" + ref.Name
}

// TrimRBAC is a transform for the informers of Config.AccessChanges (typed rbac/v1 ones):
// it keeps of each object what tells a change and whom it concerns (name, namespace, UID,
// resourceVersion; a binding's roleRef and subjects) and drops the rest, the rules above
// all: the API server's reviews read them, the controller never does.
func TrimRBAC(obj any) (any, error) {
	switch o := obj.(type) {
	case *rbacv1.Role:
		return &rbacv1.Role{TypeMeta: o.TypeMeta, ObjectMeta: trimmedMeta(o.ObjectMeta)}, nil
	case *rbacv1.ClusterRole:
		return &rbacv1.ClusterRole{TypeMeta: o.TypeMeta, ObjectMeta: trimmedMeta(o.ObjectMeta)}, nil
	case *rbacv1.RoleBinding:
		return &rbacv1.RoleBinding{TypeMeta: o.TypeMeta, ObjectMeta: trimmedMeta(o.ObjectMeta), RoleRef: o.RoleRef, Subjects: o.Subjects}, nil
	case *rbacv1.ClusterRoleBinding:
		return &rbacv1.ClusterRoleBinding{TypeMeta: o.TypeMeta, ObjectMeta: trimmedMeta(o.ObjectMeta), RoleRef: o.RoleRef, Subjects: o.Subjects}, nil
	}
	return obj, nil
}

func trimmedMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}
}
