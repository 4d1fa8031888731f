package node

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestDeleteNode(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(newNode("n1", true, nil))
	req := request(t, Delete{}, client, map[string]string{"node": "n1"})
	res, err := Delete{}.Create(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, "true", res.Outputs["deleted"])
	_, err = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))

	res, err = Delete{}.Create(ctx, req)
	require.NoError(t, err, "deleting a node that is gone is done")
	assert.Equal(t, "false", res.Outputs["deleted"])
}
