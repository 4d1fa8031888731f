package trigger

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stepwise-dev/stepwise/pkg/trigger/objectref"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// kubeletNode is a Node as a kubelet writes it, in part: what a trigger on Nodes caches
// and what it need not.
func kubeletNode() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": "n1", "uid": "u1", "resourceVersion": "7",
			"labels": map[string]any{"zone": "a"}, "annotations": map[string]any{"node.alpha.kubernetes.io/ttl": "0"}},
		"spec": map[string]any{"providerID": "kwok://n1", "unschedulable": true,
			"taints": []any{map[string]any{"key": "k", "effect": "NoSchedule"}}, "podCIDR": "10.0.0.0/24"},
		"status": map[string]any{
			"conditions": []any{
				map[string]any{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
					"lastHeartbeatTime": "2026-11-27T07:00:00Z", "lastTransitionTime": "2026-11-27T06:00:00Z"},
				map[string]any{"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
			},
			"images":   []any{map[string]any{"names": []any{"registry/app@sha256:0123"}, "sizeBytes": int64(123456789)}},
			"nodeInfo": map[string]any{"kubeletVersion": "v1.37.1", "osImage": "Debian"},
			"capacity": map[string]any{"cpu": "2", "memory": "24Gi"},
		},
	}}
}

// TestACachedNodeKeepsWhatTriggersRead: metadata, the paths the triggers read, the taints,
// cordon and each condition's type and status; not the images, capacity or messages.
func TestACachedNodeKeepsWhatTriggersRead(t *testing.T) {
	params, err := objectref.Parse(map[string]string{"version": "$(object.status.nodeInfo.kubeletVersion)"})
	require.NoError(t, err)
	fields, err := rules.ParseMatchFields(nil)
	require.NoError(t, err)
	node := kubeletNode()
	kept := keptFieldsOf(nodesResource, append(params.Paths(), fields.Paths()...))
	_, err = kept.Transform(node)
	require.NoError(t, err)

	assert.Equal(t, map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": kubeletNode().Object["metadata"],
		"spec": map[string]any{"unschedulable": true,
			"taints": []any{map[string]any{"key": "k", "effect": "NoSchedule"}}},
		"status": map[string]any{
			"conditions": []any{map[string]any{"type": "Ready", "status": "True"}, map[string]any{"type": "MemoryPressure", "status": "False"}},
			"nodeInfo":   map[string]any{"kubeletVersion": "v1.37.1"},
		},
	}, node.Object)
	got, err := params.Bind(node)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"version": "v1.37.1"}, got)
	assert.Equal(t, rules.UnavailableUnschedulable, rules.NodeUnavailable(node), "as of the whole node")

	// A trigger that reads the conditions whole gets them whole.
	node = kubeletNode()
	_, err = keptFieldsOf(nodesResource, [][]string{{"status", "conditions"}}).Transform(node)
	require.NoError(t, err)
	assert.Equal(t, kubeletNode().Object["status"].(map[string]any)["conditions"], node.Object["status"].(map[string]any)["conditions"])

	// Another kind keeps no taints nor conditions of its own accord.
	cm := kubeletNode()
	_, err = keptFieldsOf(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, nil).Transform(cm)
	require.NoError(t, err)
	assert.Equal(t, []string{"apiVersion", "kind", "metadata"}, slices.Sorted(maps.Keys(cm.Object)))
}

// TestPruningKeepsEveryCoveredPath: on random objects and random paths, every path the
// tree covers looks up the same before and after pruning, and nothing else is left
// but metadata, apiVersion and kind.
func TestPruningKeepsEveryCoveredPath(t *testing.T) {
	keys := []string{"a", "b", "c", "metadata"}
	var randomValue func(r *rand.Rand, depth int) any
	randomValue = func(r *rand.Rand, depth int) any {
		switch n := r.IntN(5); {
		case depth > 3 || n == 0:
			return fmt.Sprint(r.IntN(3))
		case n == 1:
			return []any{"x", int64(1)}
		case n == 2:
			return nil
		default:
			m := map[string]any{}
			for _, k := range keys {
				if r.IntN(2) == 0 {
					m[k] = randomValue(r, depth+1)
				}
			}
			return m
		}
	}
	randomPath := func(r *rand.Rand) []string {
		path := make([]string, 1+r.IntN(3))
		for i := range path {
			path[i] = keys[r.IntN(len(keys))]
		}
		return path
	}
	for seed := range uint64(500) {
		r := rand.New(rand.NewPCG(seed, 1))
		obj, ok := randomValue(r, 0).(map[string]any)
		if !ok {
			continue
		}
		var paths [][]string
		for range r.IntN(4) {
			paths = append(paths, randomPath(r))
		}
		full := &unstructured.Unstructured{Object: obj}
		pruned := full.DeepCopy()
		tree := newFieldTree(append(paths, metadataPath, apiVersionPath, kindPath)...)
		tree.prune(pruned.Object)
		for _, p := range append(paths, [][]string{{"metadata"}, {"a"}, {"a", "b"}, {"b", "c", "a"}}...) {
			if !tree.covers(p) {
				continue
			}
			want, wantFound := objectref.Lookup(full, p)
			got, gotFound := objectref.Lookup(pruned, p)
			require.Equal(t, wantFound, gotFound, "seed %d path %v", seed, p)
			require.Equal(t, want, got, "seed %d path %v", seed, p)
		}
		for k := range pruned.Object {
			require.True(t, tree.covers([]string{k}) || tree.children[k] != nil, "seed %d: %s is kept for nothing", seed, k)
		}
	}
}
