package k8s

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestChangedPaths(t *testing.T) {
	live := func() map[string]any {
		return map[string]any{
			"apiVersion": "apps/v1",
			"kind":       "Deployment",
			"metadata": map[string]any{
				"name": "web", "uid": "u-1", "resourceVersion": "7", "generation": int64(2), "creationTimestamp": "2030-01-01T00:00:00Z",
				"managedFields": []any{map[string]any{"manager": "stepwise"}},
				"labels":        map[string]any{"app": "web", "app.kubernetes.io/name": "web"},
			},
			"spec": map[string]any{
				"replicas": int64(2),
				"template": map[string]any{"spec": map[string]any{"containers": []any{
					map[string]any{"name": "web", "image": "web:1"},
				}}},
			},
			"status": map[string]any{"readyReplicas": int64(2)},
		}
	}
	tests := []struct {
		name   string
		change func(obj map[string]any)
		want   []string
	}{
		{"the same", func(map[string]any) {}, nil},
		{"only what the server keeps", func(obj map[string]any) {
			md := obj["metadata"].(map[string]any)
			md["resourceVersion"], md["generation"], md["managedFields"] = "8", int64(3), []any{}
			delete(obj, "status")
		}, nil},
		{"a number", func(obj map[string]any) { obj["spec"].(map[string]any)["replicas"] = int64(3) }, []string{"spec.replicas"}},
		{"a label added and one with dots changed", func(obj map[string]any) {
			labels := obj["metadata"].(map[string]any)["labels"].(map[string]any)
			labels["tier"], labels["app.kubernetes.io/name"] = "front", "web2"
		}, []string{"metadata.labels.tier", "metadata.labels[app.kubernetes.io/name]"}},
		{"a field of a list item", func(obj map[string]any) {
			c := obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
			c[0].(map[string]any)["image"] = "web:2"
		}, []string{"spec.template.spec.containers[0].image"}},
		{"a list that grows, a map removed", func(obj map[string]any) {
			s := obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			s["containers"] = append(s["containers"].([]any), map[string]any{"name": "sidecar"})
			delete(obj["metadata"].(map[string]any), "labels")
		}, []string{"metadata.labels", "spec.template.spec.containers"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, after := live(), live()
			tc.change(after)
			assert.Equal(t, tc.want, changedPaths(before, after))
			assert.Equal(t, live(), before, "left as it was")
		})
	}
}

func TestListPaths(t *testing.T) {
	assert.Equal(t, "a", listPaths([]string{"a"}, 3))
	assert.Equal(t, "a, b, c", listPaths([]string{"a", "b", "c"}, 3))
	assert.Equal(t, "a, b, c and 2 more", listPaths([]string{"a", "b", "c", "d", "e"}, 3))
}
