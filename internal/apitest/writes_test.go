package apitest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
)

// TestPipelineWritesActAsAnAPIServer: each write gets the next resourceVersion; a create
// gets a UID, generation 1 and its creation time, and a second create of the name fails.
func TestPipelineWritesActAsAnAPIServer(t *testing.T) {
	now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	client := fake.NewClientset()
	client.PrependReactor("*", "pipelines", PipelineWrites(client.Tracker(), &Versions{}, func() time.Time { return now }))
	pipelines := client.StepwiseV1alpha1().Pipelines("ns")

	created, err := pipelines.Create(t.Context(), &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "1", created.ResourceVersion)
	assert.Equal(t, "uid-p", string(created.UID))
	assert.Equal(t, int64(1), created.Generation)
	assert.Equal(t, now, created.CreationTimestamp.Time)

	_, err = pipelines.Create(t.Context(), &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsAlreadyExists(err), "got %v", err)

	created.Spec.Suspend = true
	updated, err := pipelines.Update(t.Context(), created, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "2", updated.ResourceVersion)
	got, err := pipelines.Get(t.Context(), "p", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "2", got.ResourceVersion, "as stored")
	assert.True(t, got.Spec.Suspend)
}

func TestEventsDrain(t *testing.T) {
	r := record.NewFakeRecorder(10)
	r.Event(&v1alpha1.Pipeline{}, "Normal", "StepStarted", "Step \"a\" started")
	r.Event(&v1alpha1.Pipeline{}, "Warning", "StepFailed", "Step \"a\" failed")
	assert.Equal(t, []string{"Normal StepStarted Step \"a\" started", "Warning StepFailed Step \"a\" failed"}, Events(r))
	assert.Empty(t, Events(r), "drained")
	r.Event(&v1alpha1.Pipeline{}, "Normal", "StepStarted", "Step \"b\" started")
	assert.Equal(t, []string{"Normal StepStarted"}, EventReasons(r))
}
