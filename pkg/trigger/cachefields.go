package trigger

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stepwise-dev/stepwise/pkg/dynwatch"
)

// The informer of a kind that triggers watch keeps of each object only what they read:
// its metadata, the fields their params bind and their matchFields match, and for Nodes
// what the NodeBudget and the waiting taints read. A Node as a kubelet writes it is mostly
// images, addresses, capacity and conditions with their messages; cached whole, 5,000 of
// them weigh hundreds of megabytes (make bench -trigger-nodes).

// fieldTree is a set of field paths (objectref paths: map keys only); a node marked whole
// keeps everything under it.
type fieldTree struct {
	whole    bool
	children map[string]*fieldTree
}

// newFieldTree returns the tree of paths.
func newFieldTree(paths ...[]string) *fieldTree {
	t := &fieldTree{}
	for _, p := range paths {
		t.add(p)
	}
	return t
}

// add puts path in the tree; an empty path is the whole object.
func (t *fieldTree) add(path []string) {
	n := t
	for _, field := range path {
		if n.whole {
			return
		}
		if n.children == nil {
			n.children = map[string]*fieldTree{}
		}
		child, ok := n.children[field]
		if !ok {
			child = &fieldTree{}
			n.children[field] = child
		}
		n = child
	}
	n.whole, n.children = true, nil
}

// covers tells whether the tree keeps everything under path.
func (t *fieldTree) covers(path []string) bool {
	n := t
	for _, field := range path {
		if n.whole {
			return true
		}
		if n = n.children[field]; n == nil {
			return false
		}
	}
	return n.whole
}

// coversAll tells whether the tree keeps every path.
func (t *fieldTree) coversAll(paths [][]string) bool {
	for _, p := range paths {
		if !t.covers(p) {
			return false
		}
	}
	return true
}

// prune deletes from obj what the tree does not keep. A kept path that runs through
// something other than an object leads nowhere (objectref.Lookup finds nothing there), so
// that is deleted too: every path the tree covers looks up the same in the pruned object.
func (t *fieldTree) prune(obj map[string]any) {
	if t.whole {
		return
	}
	for key, value := range obj {
		child := t.children[key]
		if child == nil {
			delete(obj, key)
			continue
		}
		if child.whole {
			continue
		}
		if m, ok := value.(map[string]any); ok {
			child.prune(m)
		} else {
			delete(obj, key)
		}
	}
}

var nodesResource = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// Paths every object's cache copy keeps: what the trigger reads of any object (name,
// labels, UID, creation and deletion time, resourceVersion, owners) and how it is listed.
var (
	metadataPath   = []string{"metadata"}
	apiVersionPath = []string{"apiVersion"}
	kindPath       = []string{"kind"}
	// Of a Node: its taints (syncTaints rewrites them), whether it is cordoned, and its
	// conditions' type and status (rules.NodeUnavailable), reduced by keptFields.prune.
	taintsPath        = []string{"spec", "taints"}
	unschedulablePath = []string{"spec", "unschedulable"}
	conditionsPath    = []string{"status", "conditions"}
)

// keptFields is what the informer of a kind keeps of each object.
type keptFields struct {
	tree *fieldTree
	// nodeConditions: a Node's status.conditions are kept as their type and status only,
	// unless a trigger reads them whole.
	nodeConditions bool
}

// keptFieldsOf returns what the informer of gvr keeps for triggers reading paths.
func keptFieldsOf(gvr schema.GroupVersionResource, paths [][]string) dynwatch.Keep {
	tree := newFieldTree(metadataPath, apiVersionPath, kindPath)
	for _, p := range paths {
		tree.add(p)
	}
	k := keptFields{tree: tree}
	if gvr == nodesResource {
		tree.add(taintsPath)
		tree.add(unschedulablePath)
		k.nodeConditions = !tree.covers(conditionsPath)
	}
	return k
}

// Covers tells whether every path is kept.
func (k keptFields) Covers(paths [][]string) bool { return k.tree.coversAll(paths) }

// Transform is the informer's transform: an object is kept as the fields say, without
// metadata.managedFields, which no trigger reads and is often the largest part of it.
func (k keptFields) Transform(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		k.prune(u)
	}
	return obj, nil
}

// prune trims obj to the kept fields, in place.
func (k keptFields) prune(obj *unstructured.Unstructured) {
	var conditions []any
	if k.nodeConditions {
		conditions = typeAndStatus(obj.Object)
	}
	k.tree.prune(obj.Object)
	if conditions != nil {
		status, ok := obj.Object["status"].(map[string]any)
		if !ok {
			status = map[string]any{}
			obj.Object["status"] = status
		}
		status["conditions"] = conditions
	}
}

// typeAndStatus returns a Node's conditions with their type and status alone; nil when it
// has none.
func typeAndStatus(obj map[string]any) []any {
	conditions, found, err := unstructured.NestedSlice(obj, conditionsPath...)
	if err != nil || !found {
		return nil
	}
	out := make([]any, 0, len(conditions))
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		kept := map[string]any{}
		for _, field := range []string{"type", "status"} {
			if v, ok := m[field]; ok {
				kept[field] = v
			}
		}
		out = append(out, kept)
	}
	return out
}
