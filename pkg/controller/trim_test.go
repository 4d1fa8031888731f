package controller

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

func TestTrimForCacheKeepsWhatTheOperatorReads(t *testing.T) {
	tests := []struct {
		name                    string
		annotations, labels     map[string]string
		wantAnnotations, wantLb map[string]string
	}{
		{name: "none"},
		{
			name:            "last-applied goes, the retry annotation stays",
			annotations:     map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"spec":{}}`, v1alpha1.RetryAnnotation: "two"},
			wantAnnotations: map[string]string{v1alpha1.RetryAnnotation: "two"},
		},
		{
			name:            "a tenant's annotations go, the trigger's stay; small labels stay whole (the archive records them)",
			annotations:     map[string]string{"note": "x", v1alpha1.AnnotationObject: "node-1", "stepwise.dev/other": "y"},
			labels:          map[string]string{"team": "a", v1alpha1.LabelTriggerUID: "u", v1alpha1.LabelNodeBudget: "b"},
			wantAnnotations: map[string]string{v1alpha1.AnnotationObject: "node-1"},
			wantLb:          map[string]string{"team": "a", v1alpha1.LabelTriggerUID: "u", v1alpha1.LabelNodeBudget: "b"},
		},
		{
			name:   "labels over the bound: only those the operator reads stay",
			labels: map[string]string{"big": strings.Repeat("v", 63), "team": strings.Repeat("a", maxKeptPipelineLabels), v1alpha1.LabelTriggerUID: "u"},
			wantLb: map[string]string{v1alpha1.LabelTriggerUID: "u"},
		},
		{
			name:        "nothing read and labels over the bound: no map",
			annotations: map[string]string{"note": "x"}, labels: map[string]string{"team": strings.Repeat("a", maxKeptPipelineLabels)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{
				Name: "p", Annotations: tt.annotations, Labels: tt.labels,
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			}}
			out, err := TrimForCache(p)
			require.NoError(t, err)
			got := out.(*v1alpha1.Pipeline)
			assert.Nil(t, got.ManagedFields)
			assert.Equal(t, tt.wantAnnotations, got.Annotations)
			assert.Equal(t, tt.wantLb, got.Labels)
			assert.Nil(t, got.Elided, "small values stay")
		})
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: "ns/p"}
	out, err := TrimForCache(tombstone)
	require.NoError(t, err)
	assert.Equal(t, tombstone, out)
}
