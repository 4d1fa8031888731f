package apitest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

func TestWhatAClientDid(t *testing.T) {
	c := fake.NewClientset()
	ctx := t.Context()
	cms := c.CoreV1().ConfigMaps("ns")
	_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cms.Get(ctx, "a", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = cms.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	_, err = cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"data":{"k":"v"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().Pods("ns").UpdateStatus(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, metav1.UpdateOptions{})
	require.Error(t, err) // not found: the action is recorded all the same

	assert.Equal(t, []string{"create configmaps", "patch configmaps", "update pods/status"}, Writes(c))
	assert.Len(t, WriteActions(c), 3)
	assert.Equal(t, []string{"get configmaps", "list configmaps"}, Reads(c))
	assert.Equal(t, []string{`{"data":{"k":"v"}}`}, Patches(c))
}
