package k8s

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// serverFields are the fields of an object that the API server keeps by itself: an apply
// that changes nothing else still changes some of them (managedFields), and an apply that
// changes the spec bumps others (resourceVersion, generation). A plan compares objects
// without them.
var serverFields = [][]string{
	{"metadata", "managedFields"},
	{"metadata", "resourceVersion"},
	{"metadata", "generation"},
	{"metadata", "creationTimestamp"},
	{"metadata", "uid"},
	{"metadata", "selfLink"},
	{"status"},
}

// changedPaths lists the fields in which after differs from before, leaving out
// serverFields, each as a path such as spec.replicas, metadata.labels[stepwise.dev/step]
// or spec.template.spec.containers[0].image, sorted. A field that only one side has, or
// a list whose length changes, is one path: its own, not one per field under it.
func changedPaths(before, after map[string]any) []string {
	var paths []string
	diffValues("", withoutServerFields(before), withoutServerFields(after), &paths)
	slices.Sort(paths)
	return paths
}

// withoutServerFields is a shallow copy of obj without serverFields: only the maps on
// the way to them are copied, and obj is left as it is.
func withoutServerFields(obj map[string]any) map[string]any {
	out := maps.Clone(obj)
	for _, path := range serverFields {
		m := out
		for i, key := range path {
			if i == len(path)-1 {
				delete(m, key)
				break
			}
			next, ok := m[key].(map[string]any)
			if !ok {
				break
			}
			next = maps.Clone(next)
			m[key] = next
			m = next
		}
	}
	return out
}

// diffValues appends to paths the paths under path at which a and b differ.
func diffValues(path string, a, b any, paths *[]string) {
	switch a := a.(type) {
	case map[string]any:
		if b, ok := b.(map[string]any); ok {
			for key, av := range a {
				bv, found := b[key]
				if !found {
					*paths = append(*paths, joinPath(path, key))
					continue
				}
				diffValues(joinPath(path, key), av, bv, paths)
			}
			for key := range b {
				if _, found := a[key]; !found {
					*paths = append(*paths, joinPath(path, key))
				}
			}
			return
		}
	case []any:
		if b, ok := b.([]any); ok && len(a) == len(b) {
			for i := range a {
				diffValues(path+"["+strconv.Itoa(i)+"]", a[i], b[i], paths)
			}
			return
		}
	}
	if !reflect.DeepEqual(a, b) {
		*paths = append(*paths, path)
	}
}

// plainKey is a map key that reads well after a dot; others (label keys such as
// app.kubernetes.io/name) go in brackets.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func joinPath(path, key string) string {
	if !plainKey.MatchString(key) {
		return path + "[" + key + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// maxPaths bounds the paths a plan's note names.
const maxPaths = 10

// listPaths names at most limit paths, then counts the rest: "a, b and 3 more".
func listPaths(paths []string, limit int) string {
	if len(paths) <= limit {
		return strings.Join(paths, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(paths[:limit], ", "), len(paths)-limit)
}
