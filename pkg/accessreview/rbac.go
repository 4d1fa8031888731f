package accessreview

import (
	"cmp"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
)

// bindingRoleIndex: RoleBindings and ClusterRoleBindings by the role they refer to
// (roleKey), on the RBAC informers.
const bindingRoleIndex = "stepwise.dev/binding-role"

// Bindings reads the RBAC informers (typed rbac/v1 ones, trimmed by TrimRBAC) to tell
// whose rights a change of an RBAC object may change.
type Bindings struct {
	indexers []cache.Indexer
	synced   []cache.InformerSynced
}

// NewBindings indexes the binding informers among informers by the role they refer to.
// Their event handlers are the caller's.
func NewBindings(informers []cache.SharedInformer) (*Bindings, error) {
	b := &Bindings{}
	for _, inf := range informers {
		if indexed, ok := inf.(cache.SharedIndexInformer); ok {
			if err := indexed.AddIndexers(cache.Indexers{bindingRoleIndex: byRoleRef}); err != nil {
				return nil, fmt.Errorf("add RBAC binding index: %w", err)
			}
			b.indexers = append(b.indexers, indexed.GetIndexer())
		}
		b.synced = append(b.synced, inf.HasSynced)
	}
	return b, nil
}

// Synced are the informers' HasSynced.
func (b *Bindings) Synced() []cache.InformerSynced { return b.synced }

// Change is whom a change of RBAC objects may give or take rights: the bindings it concerns.
type Change struct {
	bindings []binding
}

// binding is what of a RoleBinding or ClusterRoleBinding says whom it grants rights, and
// where.
type binding struct {
	// namespace is a RoleBinding's; empty for a ClusterRoleBinding.
	namespace string
	subjects  []rbacv1.Subject
}

// Attribute tells whom the change of RBAC objects (their old and new state, either nil) may
// give or take rights, and whether it could attribute the change.
//
// A binding concerns the ServiceAccounts one of its subjects names; a RoleBinding only in
// its namespace, as it grants rights in its namespace only (the reviews ask for the
// ServiceAccount's namespace, or the cluster, which no RoleBinding grants). A Role or
// ClusterRole concerns what the bindings that refer to it concern, as the binding
// informers hold them: its rules are not read, the API server's review reads them. A
// ClusterRole aggregated into another changes the other's rules too; the aggregation
// controller writes those, and that change is attributed in turn.
//
// What cannot be attributed: an object of another type (an informer that keeps only
// metadata has no subjects or roleRef to read), and a role while the binding informers
// have not synced or there are none.
func (b *Bindings) Attribute(objs ...any) (Change, bool) {
	var change Change
	for _, obj := range objs {
		if obj == nil {
			continue
		}
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		switch o := obj.(type) {
		case *rbacv1.RoleBinding:
			change.bindings = append(change.bindings, binding{namespace: o.Namespace, subjects: o.Subjects})
		case *rbacv1.ClusterRoleBinding:
			change.bindings = append(change.bindings, binding{subjects: o.Subjects})
		case *rbacv1.Role:
			found, ok := b.bindingsOf(roleKey(o.Namespace, rbacv1.RoleRef{Kind: "Role", Name: o.Name}))
			if !ok {
				return Change{}, false
			}
			change.bindings = append(change.bindings, found...)
		case *rbacv1.ClusterRole:
			found, ok := b.bindingsOf(roleKey("", rbacv1.RoleRef{Kind: "ClusterRole", Name: o.Name}))
			if !ok {
				return Change{}, false
			}
			change.bindings = append(change.bindings, found...)
		default:
			return Change{}, false
		}
	}
	return change, true
}

// None tells whether the change concerns no one.
func (c Change) None() bool { return len(c.bindings) == 0 }

// Concerns tells whether the change may give or take rights of sa.
func (c Change) Concerns(sa ServiceAccount) bool {
	return slices.ContainsFunc(c.bindings, func(b binding) bool { return b.grants(sa) })
}

// bindingsOf lists the bindings that refer to a role (roleKey); false when the binding
// informers cannot tell.
func (b *Bindings) bindingsOf(role string) ([]binding, bool) {
	if len(b.indexers) == 0 {
		return nil, false
	}
	for _, synced := range b.synced {
		if !synced() {
			return nil, false
		}
	}
	var out []binding
	for _, indexer := range b.indexers {
		items, err := indexer.ByIndex(bindingRoleIndex, role)
		if err != nil {
			utilruntime.HandleError(fmt.Errorf("find the bindings of %s: %w", role, err))
			return nil, false
		}
		for _, item := range items {
			switch rb := item.(type) {
			case *rbacv1.RoleBinding:
				out = append(out, binding{namespace: rb.Namespace, subjects: rb.Subjects})
			case *rbacv1.ClusterRoleBinding:
				out = append(out, binding{subjects: rb.Subjects})
			}
		}
	}
	return out, true
}

// grants tells whether the binding may give sa rights that its reviews ask about: a
// RoleBinding of another namespace grants none.
func (b binding) grants(sa ServiceAccount) bool {
	if b.namespace != "" && b.namespace != sa.Namespace {
		return false
	}
	return slices.ContainsFunc(b.subjects, func(s rbacv1.Subject) bool { return isServiceAccount(s, b.namespace, sa) })
}

// isServiceAccount tells whether a subject of a binding of namespace bindingNS (empty for a
// ClusterRoleBinding) is sa as the API server authorizes it: as a ServiceAccount (whose
// namespace a RoleBinding may leave out: its own), as its user name, or as one of its
// groups (the ones the review gives it).
func isServiceAccount(s rbacv1.Subject, bindingNS string, sa ServiceAccount) bool {
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		return cmp.Or(s.Namespace, bindingNS) == sa.Namespace && s.Name == sa.Name
	case rbacv1.UserKind:
		return s.Name == sa.User()
	case rbacv1.GroupKind:
		return slices.Contains(sa.Groups(), s.Name)
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

// TrimRBAC is a transform for the RBAC informers (typed rbac/v1 ones): it keeps of each
// object what tells a change and whom it concerns (name, namespace, UID, resourceVersion;
// a binding's roleRef and subjects) and drops the rest, the rules above all: the API
// server's reviews read them, the operator never does.
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
