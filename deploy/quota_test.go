package deploy_test

// What a tenant can spend (docs/security.md): tenant-quota.yaml bounds the objects a tenant
// namespace makes the operator hold, and apf-flowschema.yaml is the example of keeping the
// operator's requests out of the tenants' queues.

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// tenantQuota reads tenant-quota.yaml, the ResourceQuota an admin applies in each tenant
// namespace.
func tenantQuota(t *testing.T) *corev1.ResourceQuota {
	t.Helper()
	data, err := os.ReadFile("tenant-quota.yaml")
	require.NoError(t, err)
	var q corev1.ResourceQuota
	require.NoError(t, yaml.UnmarshalStrict(data, &q), "one ResourceQuota, nothing else")
	return &q
}

// TestTenantQuota: tenant-quota.yaml bounds how many of each Stepwise kind the operator
// caches a tenant namespace may hold.
func TestTenantQuota(t *testing.T) {
	q := tenantQuota(t)
	assert.Equal(t, "ResourceQuota", q.Kind)
	assert.Equal(t, "stepwise", q.Name)
	assert.Empty(t, q.Namespace, "applied with kubectl apply -n TENANT: the namespace is the admin's choice")
	assert.Equal(t, "stepwise", q.Labels["app.kubernetes.io/part-of"])
	assert.Empty(t, q.Spec.Scopes, "every object counts, whoever made it")
	assert.Nil(t, q.Spec.ScopeSelector)

	tests := []struct {
		resource corev1.ResourceName
		want     string
	}{
		{resource: "count/pipelines.stepwise.dev", want: "500"},
		{resource: "count/pipelinetemplates.stepwise.dev", want: "50"},
		{resource: "count/pipelinetriggers.stepwise.dev", want: "50"},
		{resource: "count/approvals.stepwise.dev", want: "200"},
	}
	for _, tt := range tests {
		t.Run(string(tt.resource), func(t *testing.T) {
			got, ok := q.Spec.Hard[tt.resource]
			require.True(t, ok, "the quota bounds %s", tt.resource)
			assert.Zero(t, got.Cmp(resource.MustParse(tt.want)), "%s: %s", tt.resource, got.String())
		})
	}
	assert.Len(t, q.Spec.Hard, len(tests), "Secrets, ConfigMaps and the rest are the admin's call")

	_, inInstall := build(t)["ResourceQuota/"+q.Name]
	assert.False(t, inInstall, "it belongs in tenant namespaces, not in the install's")
}

// TestTenantQuotaCountsEveryNamespacedKind: the quota names each namespaced kind of crd/
// by the plural the API server counts it under, and no cluster-scoped one (a ResourceQuota
// counts only what is in its namespace).
func TestTenantQuotaCountsEveryNamespacedKind(t *testing.T) {
	files, err := filepath.Glob("../crd/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	want := map[corev1.ResourceName]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var crd apiextensionsv1.CustomResourceDefinition
		require.NoError(t, yaml.Unmarshal(data, &crd), f)
		if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
			want[corev1.ResourceName("count/"+crd.Spec.Names.Plural+"."+crd.Spec.Group)] = true
		}
	}
	got := map[corev1.ResourceName]bool{}
	for name := range tenantQuota(t).Spec.Hard {
		got[name] = true
	}
	assert.Equal(t, want, got)
}

// The example FlowSchema is valid, matches the operator's ServiceAccount before the
// default schema of every ServiceAccount does, and is left out of the install.
func TestFlowSchemaExample(t *testing.T) {
	data, err := os.ReadFile("apf-flowschema.yaml")
	require.NoError(t, err)
	var fs flowcontrolv1.FlowSchema
	require.NoError(t, yaml.UnmarshalStrict(data, &fs))
	assert.Equal(t, "FlowSchema", fs.Kind)
	assert.Equal(t, "workload-high", fs.Spec.PriorityLevelConfiguration.Name, "a suggested level every cluster has")
	assert.Less(t, fs.Spec.MatchingPrecedence, int32(9000), "matched before the suggested service-accounts schema (9000)")

	objs := build(t)
	d := decode[appsv1.Deployment](t, objs, "Deployment/stepwise-operator")
	require.Len(t, fs.Spec.Rules, 1)
	assert.Equal(t, []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
		ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Name: d.Spec.Template.Spec.ServiceAccountName, Namespace: d.Namespace}}},
		fs.Spec.Rules[0].Subjects, "the operator's ServiceAccount, and no one else")
	require.Len(t, fs.Spec.Rules[0].ResourceRules, 1)
	r := fs.Spec.Rules[0].ResourceRules[0]
	assert.True(t, r.ClusterScope)
	for _, all := range [][]string{r.Verbs, r.APIGroups, r.Resources, r.Namespaces} {
		assert.Equal(t, []string{"*"}, all, "every request of the operator")
	}

	_, inInstall := objs["FlowSchema/"+fs.Name]
	assert.False(t, inInstall, "the example is not in kustomization.yaml")
}
