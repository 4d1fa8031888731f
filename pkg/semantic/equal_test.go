package semantic

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// TestEqualIsSemanticEquality: the same answers as equality.Semantic.DeepEqual, where
// reflect.DeepEqual would say otherwise too.
func TestEqualIsSemanticEquality(t *testing.T) {
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		a, b any
		want bool
	}{
		{name: "identical statuses", a: &v1alpha1.PipelineStatus{Phase: v1alpha1.PipelineSucceeded, Progress: "3/3"},
			b: &v1alpha1.PipelineStatus{Phase: v1alpha1.PipelineSucceeded, Progress: "3/3"}, want: true},
		{name: "a nil and an empty slice", a: &v1alpha1.PipelineStatus{Steps: nil}, b: &v1alpha1.PipelineStatus{Steps: []v1alpha1.StepStatus{}}, want: true},
		{name: "one instant in two locations",
			a: &v1alpha1.PipelineStatus{StartTime: &metav1.Time{Time: now}},
			b: &v1alpha1.PipelineStatus{StartTime: &metav1.Time{Time: now.In(time.FixedZone("x", 3600))}}, want: true},
		{name: "one quantity written two ways", a: resource.MustParse("1000m"), b: resource.MustParse("1"), want: true},
		{name: "a phase changed", a: &v1alpha1.PipelineStatus{Phase: v1alpha1.PipelineRunning}, b: &v1alpha1.PipelineStatus{Phase: v1alpha1.PipelineSucceeded}},
		{name: "a step more", a: &v1alpha1.PipelineStatus{}, b: &v1alpha1.PipelineStatus{Steps: []v1alpha1.StepStatus{{Name: "a"}}}},
		{name: "unstructured maps", a: map[string]any{"a": int64(1), "b": []any{"x"}}, b: map[string]any{"a": int64(1), "b": []any{"x"}}, want: true},
		{name: "unstructured maps that differ", a: map[string]any{"a": int64(1)}, b: map[string]any{"a": int64(2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, equality.Semantic.DeepEqual(tt.a, tt.b), "the case says what Semantic says")
			assert.Equal(t, tt.want, Equal(tt.a, tt.b))
		})
	}
}

// BenchmarkEqualUnchangedStatus compares a finished pipeline's status with a copy of itself,
// as every sync of a finished pipeline does: Equal against equality.Semantic.DeepEqual.
func BenchmarkEqualUnchangedStatus(b *testing.B) {
	data, err := os.ReadFile("../controller/testdata/finished-pipeline.json")
	require.NoError(b, err)
	var p v1alpha1.Pipeline
	require.NoError(b, json.Unmarshal(data, &p))
	same := p.Status.DeepCopy()
	for _, bb := range []struct {
		name  string
		equal func(a, b any) bool
	}{{"Equal", Equal}, {"Semantic", equality.Semantic.DeepEqual}} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !bb.equal(&p.Status, same) {
					b.Fatal("a copy differs")
				}
			}
		})
	}
}
