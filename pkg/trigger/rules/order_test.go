package rules

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
)

// TestCompareObjects: the oldest first, then by namespace, then by name.
func TestCompareObjects(t *testing.T) {
	objects := []*unstructured.Unstructured{
		triggertest.WebApp("b", "web", time.Second, nil),
		triggertest.Node("young", time.Hour, nil),
		triggertest.WebApp("a", "web", time.Second, nil),
		triggertest.WebApp("a", "api", time.Second, nil),
		triggertest.Node("old", 0, nil),
	}
	slices.SortFunc(objects, CompareObjects)
	var got []string
	for _, obj := range objects {
		got = append(got, ObjectKey(obj.GetNamespace(), obj.GetName()))
	}
	assert.Equal(t, []string{"old", "a/api", "a/web", "b/web", "young"}, got)
}
