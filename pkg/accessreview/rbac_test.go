package accessreview

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestChangeConcerns: a binding concerns the ServiceAccount it names as a ServiceAccount
// (a RoleBinding's own namespace when it leaves it out), as its user name or as one of its
// groups; a RoleBinding only in its namespace.
func TestChangeConcerns(t *testing.T) {
	retirer := ServiceAccount{Namespace: "ns", Name: "retirer"}
	b := &Bindings{}
	tests := []struct {
		name    string
		binding any
		want    bool
	}{
		{"a ClusterRoleBinding naming it", &rbacv1.ClusterRoleBinding{Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "ns", Name: "retirer"}}}, true},
		{"a RoleBinding of its namespace, the namespace left out", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "retirer"}}}, true},
		{"a RoleBinding of another namespace", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "other"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "ns", Name: "retirer"}}}, false},
		{"its user name", &rbacv1.ClusterRoleBinding{Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "system:serviceaccount:ns:retirer"}}}, true},
		{"its namespace's group", &rbacv1.ClusterRoleBinding{Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "system:serviceaccounts:ns"}}}, true},
		{"another namespace's group", &rbacv1.ClusterRoleBinding{Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "system:serviceaccounts:other"}}}, false},
		{"another ServiceAccount", &rbacv1.ClusterRoleBinding{Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "ns", Name: "x"}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			change, ok := b.Attribute(nil, tt.binding)
			require.True(t, ok)
			assert.Equal(t, tt.want, change.Concerns(retirer))
		})
	}
	_, ok := b.Attribute(&rbacv1.Role{})
	assert.False(t, ok, "a role without binding informers cannot be attributed")
	_, ok = b.Attribute(&metav1.PartialObjectMetadata{})
	assert.False(t, ok, "an object of another type cannot be attributed")
}

// TestTrimRBAC: the RBAC informers keep what attributes a change, and not the rules.
func TestTrimRBAC(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "uid-r", ResourceVersion: "7",
		Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}
	kept := metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "uid-r", ResourceVersion: "7"}
	rules := []rbacv1.PolicyRule{{Verbs: []string{"list"}, Resources: []string{"nodes"}}}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "retirer", Namespace: "ns"}}
	tests := []struct {
		name    string
		in, out any
	}{
		{name: "Role", in: &rbacv1.Role{ObjectMeta: meta, Rules: rules}, out: &rbacv1.Role{ObjectMeta: kept}},
		{name: "ClusterRole", in: &rbacv1.ClusterRole{ObjectMeta: meta, Rules: rules,
			AggregationRule: &rbacv1.AggregationRule{}}, out: &rbacv1.ClusterRole{ObjectMeta: kept}},
		{name: "RoleBinding", in: &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "x"}, Subjects: subjects},
			out: &rbacv1.RoleBinding{ObjectMeta: kept, RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "x"}, Subjects: subjects}},
		{name: "ClusterRoleBinding", in: &rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "x"}, Subjects: subjects},
			out: &rbacv1.ClusterRoleBinding{ObjectMeta: kept, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "x"}, Subjects: subjects}},
		{name: "anything else", in: "x", out: "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TrimRBAC(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.out, got)
		})
	}
}
