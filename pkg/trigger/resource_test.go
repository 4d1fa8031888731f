package trigger

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

func TestParseResources(t *testing.T) {
	tests := []struct {
		in      string
		want    []schema.GroupResource
		wantErr string
	}{
		{in: "nodes,webapps.demo.stepwise.dev", want: []schema.GroupResource{
			{Resource: "nodes"}, {Group: "demo.stepwise.dev", Resource: "webapps"},
		}},
		{in: " nodes , deployments.apps ", want: []schema.GroupResource{{Resource: "nodes"}, {Group: "apps", Resource: "deployments"}}},
		{in: "", want: nil},
		{in: "nodes,nodes", want: []schema.GroupResource{{Resource: "nodes"}}},
		{in: "nodes,", wantErr: "empty entry"},
		{in: "Nodes", wantErr: `"Nodes": not a resource.group`},
		{in: "nodes/status", wantErr: `"nodes/status": not a resource.group`},
		{in: "*", wantErr: `"*": not a resource.group`},
		{in: ".apps", wantErr: `".apps": not a resource.group`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseResources(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

var (
	nodesGVR   = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	webappsGVR = schema.GroupVersionResource{Group: "demo.stepwise.dev", Version: "v1alpha1", Resource: "webapps"}
	secretsGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	// pipelinesGVR: stepwise's own Pipelines, which an installer may let triggers watch.
	pipelinesGVR = v1alpha1.SchemeGroupVersion.WithResource("pipelines")
)

// testMapper knows Nodes, Secrets, ConfigMaps and WebApps, as discovery would.
func testMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Node"}, meta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "demo.stepwise.dev", Version: "v1alpha1", Kind: "WebApp"}, meta.RESTScopeNamespace)
	m.Add(v1alpha1.SchemeGroupVersion.WithKind("Pipeline"), meta.RESTScopeNamespace)
	return m
}

func TestResolveResource(t *testing.T) {
	tests := []struct {
		name       string
		resource   v1alpha1.TriggerResource
		want       target
		wantReason string
		wantMsg    []string
	}{
		{name: "cluster-scoped", resource: v1alpha1.TriggerResource{APIVersion: "v1", Kind: "Node"},
			want: target{gvr: nodesGVR}},
		{name: "namespaced custom resource", resource: v1alpha1.TriggerResource{APIVersion: "demo.stepwise.dev/v1alpha1", Kind: "WebApp"},
			want: target{gvr: webappsGVR, namespaced: true}},
		{name: "not allowed", resource: v1alpha1.TriggerResource{APIVersion: "v1", Kind: "Secret"},
			wantReason: v1alpha1.TriggerReasonResourceNotAllowed, wantMsg: []string{`"secrets"`, "--trigger-resources", "nodes,webapps.demo.stepwise.dev"}},
		{name: "unknown kind", resource: v1alpha1.TriggerResource{APIVersion: "v1", Kind: "Nope"},
			wantReason: v1alpha1.TriggerReasonInvalidResource, wantMsg: []string{"v1", "Nope"}},
		{name: "bad apiVersion", resource: v1alpha1.TriggerResource{APIVersion: "a/b/c", Kind: "Node"},
			wantReason: v1alpha1.TriggerReasonInvalidResource, wantMsg: []string{"a/b/c"}},
	}
	allowed, err := ParseResources("nodes,webapps.demo.stepwise.dev")
	require.NoError(t, err)
	r := newResourceResolver(testMapper(), allowed, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, prob := r.resolve(tt.resource)
			if tt.wantReason != "" {
				require.NotNil(t, prob)
				assert.Equal(t, tt.wantReason, prob.reason)
				for _, m := range tt.wantMsg {
					assert.Contains(t, prob.message, m)
				}
				return
			}
			require.Nil(t, prob)
			assert.Equal(t, tt.want, got)
		})
	}
}

// Secrets are never watched unless the installer listed them.
func TestSecretsOnlyWhenListed(t *testing.T) {
	allowed, err := ParseResources("secrets,nodes")
	require.NoError(t, err)
	got, prob := newResourceResolver(testMapper(), allowed, nil).resolve(v1alpha1.TriggerResource{APIVersion: "v1", Kind: "Secret"})
	require.Nil(t, prob)
	assert.Equal(t, target{gvr: secretsGVR, namespaced: true}, got)

	_, prob = newResourceResolver(testMapper(), nil, nil).resolve(v1alpha1.TriggerResource{APIVersion: "v1", Kind: "Node"})
	require.NotNil(t, prob)
	assert.Equal(t, v1alpha1.TriggerReasonResourceNotAllowed, prob.reason)
	assert.Contains(t, prob.message, "no kind")
}
