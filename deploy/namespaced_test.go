package deploy_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The namespaced variant: the operator may impersonate no ServiceAccount anywhere, except
// in the namespaces a cluster admin gave it with namespaced/tenant.yaml.

// rulesGrant tells whether any rule grants verb (or every verb).
func rulesGrant(rules []rbacv1.PolicyRule, verb string) bool {
	return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")
	})
}

func TestNamespacedVariantImpersonatesNobody(t *testing.T) {
	objs := buildDir(t, "namespaced")
	def := build(t)
	var keys []string
	for k := range objs {
		keys = append(keys, k)
	}
	var defKeys []string
	for k := range def {
		defKeys = append(defKeys, k)
	}
	assert.ElementsMatch(t, defKeys, keys, "the same objects as the default install")
	assert.Equal(t, string(def["Deployment/stepwise-operator"]), string(objs["Deployment/stepwise-operator"]),
		"the same operator: only its RBAC differs")

	for key := range objs {
		switch {
		case strings.HasPrefix(key, "ClusterRole/"):
			cr := decode[rbacv1.ClusterRole](t, objs, key)
			assert.False(t, rulesGrant(cr.Rules, "impersonate"), "%s grants impersonate", key)
			assert.Empty(t, cr.AggregationRule, key)
		case strings.HasPrefix(key, "Role/"):
			role := decode[rbacv1.Role](t, objs, key)
			assert.False(t, rulesGrant(role.Rules, "impersonate"), "%s grants impersonate", key)
		}
	}
	cr := decode[rbacv1.ClusterRole](t, objs, "ClusterRole/stepwise-operator")
	for _, r := range cr.Rules {
		switch {
		case slices.Equal(r.Resources, []string{"namespaces"}):
			assert.Equal(t, []string{"list", "watch"}, r.Verbs, "it only learns which namespaces are being deleted")
		case slices.Equal(r.Resources, []string{"subjectaccessreviews"}):
			assert.Equal(t, []string{"create"}, r.Verbs, "it only asks what a trigger's ServiceAccount (or a scraper) may do")
		case slices.Equal(r.Resources, []string{"tokenreviews"}):
			assert.Equal(t, []string{"create"}, r.Verbs, "it only asks who a scraper of its metrics is")
		case slices.Equal(r.APIGroups, []string{"rbac.authorization.k8s.io"}):
			assert.Equal(t, []string{"list", "watch"}, r.Verbs, "it only learns that RBAC changed")
		case slices.Equal(r.Resources, []string{"nodes"}) || slices.Equal(r.Resources, []string{"webapps"}):
			assert.Equal(t, []string{"list", "watch"}, r.Verbs, "it only watches the kinds triggers may watch")
		default:
			assert.Equal(t, []string{"stepwise.dev"}, r.APIGroups,
				"cluster-wide the operator only handles Pipelines and their triggers: Events go to tenant namespaces only")
			// A trigger of a namespace never opted in creates and deletes nothing.
			assert.NotContains(t, r.Verbs, "create", "%v: only tenant.yaml lets the operator create", r.Resources)
			assert.NotContains(t, r.Verbs, "delete", "%v: only tenant.yaml lets the operator delete", r.Resources)
			if slices.Contains(r.Resources, "pipelinetriggers") {
				assert.NotContains(t, r.Verbs, "patch", "the trigger's finalizer only where it may act")
			}
		}
	}
}

func TestNamespacedTenantRole(t *testing.T) {
	data, err := os.ReadFile("namespaced/tenant.yaml")
	require.NoError(t, err)
	var role *rbacv1.Role
	var binding *rbacv1.RoleBinding
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var meta struct{ Kind string }
		require.NoError(t, yaml.Unmarshal([]byte(doc), &meta))
		switch meta.Kind {
		case "Role":
			role = &rbacv1.Role{}
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), role))
		case "RoleBinding":
			binding = &rbacv1.RoleBinding{}
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), binding))
		default:
			t.Errorf("tenant.yaml holds a %q: only a Role and its RoleBinding belong there", meta.Kind)
		}
	}
	require.NotNil(t, role, "tenant.yaml has a Role")
	require.NotNil(t, binding, "tenant.yaml has a RoleBinding")

	// Applied with kubectl apply -n TENANT: the namespace is the admin's choice.
	assert.Empty(t, role.Namespace)
	assert.Empty(t, binding.Namespace)

	allowed := map[string][]string{} // group/resource -> verbs
	for _, r := range role.Rules {
		assert.NotContains(t, r.Verbs, "*")
		assert.NotContains(t, r.APIGroups, "*")
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				allowed[g+"/"+res] = append(allowed[g+"/"+res], r.Verbs...)
			}
		}
		if slices.Contains(r.Verbs, "impersonate") {
			assert.Equal(t, []string{""}, r.APIGroups, "impersonate only core ServiceAccounts")
			assert.Equal(t, []string{"serviceaccounts"}, r.Resources, "impersonate only ServiceAccounts: not users, groups or uids")
		}
	}
	assert.Equal(t, map[string][]string{
		"/serviceaccounts":              {"impersonate"},
		"/events":                       {"create", "patch"},
		"stepwise.dev/pipelines":        {"create", "delete"},
		"stepwise.dev/pipelinetriggers": {"patch"},
	}, allowed)

	assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name}, binding.RoleRef)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "stepwise-operator", Namespace: "stepwise-system"}}, binding.Subjects)
}
