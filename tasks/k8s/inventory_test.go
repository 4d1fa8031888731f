package k8s

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestInventoryMergesAndDiffsByObjectNotVersion(t *testing.T) {
	ref := func(version, kind, name string) ObjectRef {
		return ObjectRef{GroupVersionKind: schema.GroupVersionKind{Group: "apps", Version: version, Kind: kind}, Namespace: "shop", Name: name}
	}
	webBeta, web, web2, db := ref("v1beta1", "Deployment", "web"), ref("v1", "Deployment", "web"), ref("v1", "Deployment", "web2"), ref("v1", "StatefulSet", "db")
	tests := []struct {
		name           string
		previous, refs []ObjectRef
		wantUnion      []ObjectRef
		wantRemoved    []ObjectRef
		wantUnrecorded bool
	}{
		{"nothing before", nil, []ObjectRef{web}, []ObjectRef{web}, nil, true},
		{"the same", []ObjectRef{web, db}, []ObjectRef{web, db}, []ObjectRef{web, db}, nil, false},
		{"renamed", []ObjectRef{web, db}, []ObjectRef{web2, db}, []ObjectRef{web, db, web2}, []ObjectRef{web}, true},
		{"all removed", []ObjectRef{web, db}, nil, []ObjectRef{web, db}, []ObjectRef{web, db}, false},
		{"new version of the same object", []ObjectRef{webBeta, db}, []ObjectRef{web}, []ObjectRef{web, db}, []ObjectRef{db}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.wantUnion, union(tc.previous, tc.refs))
			assert.Equal(t, tc.wantRemoved, removedFrom(tc.previous, tc.refs))
			assert.Equal(t, tc.wantUnrecorded, unrecorded(tc.refs, tc.previous))
		})
	}
}

func TestObjectRefs(t *testing.T) {
	refs := []ObjectRef{
		{GroupVersionKind: deploymentGVK, Namespace: "shop", Name: "web"},
		{GroupVersionKind: serviceGVK, Namespace: "shop", Name: "web"},
		{GroupVersionKind: clusterRoleGVK, Name: "viewer"},
	}
	s := FormatObjectRefs(refs)
	assert.Equal(t, "apps/v1/Deployment/shop/web,/v1/Service/shop/web,rbac.authorization.k8s.io/v1/ClusterRole//viewer", s)
	got, err := ParseObjectRefs(s)
	require.NoError(t, err)
	assert.Equal(t, refs, got)

	for _, bad := range []string{"v1/Service/shop/web", "/v1/Service/shop/", "//Service/shop/web", "a/v1//ns/n", "a/b/c/d/e/f"} {
		_, err := ParseObjectRefs(bad)
		assert.Error(t, err, bad)
	}
	none, err := ParseObjectRefs(" ")
	require.NoError(t, err)
	assert.Empty(t, none)
}
