package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

func TestTrimForCache(t *testing.T) {
	tests := []struct {
		name            string
		annotations     map[string]string
		wantAnnotations map[string]string
	}{
		{"no annotations", nil, nil},
		{
			name:            "last-applied goes, the retry annotation stays",
			annotations:     map[string]string{lastAppliedAnnotation: `{"spec":{}}`, v1alpha1.RetryAnnotation: "two"},
			wantAnnotations: map[string]string{v1alpha1.RetryAnnotation: "two"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{
				Name: "p", Annotations: tt.annotations,
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			}}
			out, err := TrimForCache(p)
			require.NoError(t, err)
			got := out.(*v1alpha1.Pipeline)
			assert.Nil(t, got.ManagedFields)
			assert.Equal(t, tt.wantAnnotations, got.Annotations)
		})
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: "ns/p"}
	out, err := TrimForCache(tombstone)
	require.NoError(t, err)
	assert.Equal(t, tombstone, out)
}
