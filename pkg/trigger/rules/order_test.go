package rules

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestCompareObjects: the oldest first, then by namespace, then by name.
func TestCompareObjects(t *testing.T) {
	objects := []*unstructured.Unstructured{
		newWebApp("b", "web", time.Second, nil),
		newNode("young", time.Hour, nil),
		newWebApp("a", "web", time.Second, nil),
		newWebApp("a", "api", time.Second, nil),
		newNode("old", 0, nil),
	}
	slices.SortFunc(objects, CompareObjects)
	var got []string
	for _, obj := range objects {
		got = append(got, ObjectKey(obj.GetNamespace(), obj.GetName()))
	}
	assert.Equal(t, []string{"old", "a/api", "a/web", "b/web", "young"}, got)
}
