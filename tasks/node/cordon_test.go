package node

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestCordonAndItsTeardown(t *testing.T) {
	tests := []struct {
		name               string
		node               *corev1.Node
		wantWasSchedulable string
		wantUncordoned     bool
	}{
		{"schedulable node is cordoned and uncordoned again", newNode("n1", false, nil), "true", true},
		{"node cordoned by someone else stays cordoned", newNode("n1", true, nil), "false", false},
		{"node this pipeline cordoned on an earlier attempt", newNode("n1", true, map[string]string{CordonedByAnnotation: "uid-1"}), "true", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			tt.node.Spec.ProviderID = "vsphere://4201-n1"
			client := fake.NewClientset(tt.node)
			req := request(t, Cordon{}, client, map[string]string{"node": "n1"})
			res, err := Cordon{}.Create(ctx, req)
			require.NoError(t, err)
			assert.True(t, res.Done)
			assert.Equal(t, tt.wantWasSchedulable, res.Outputs["wasSchedulable"])
			assert.Equal(t, "vsphere://4201-n1", res.Outputs["providerID"])
			n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			require.NoError(t, err)
			assert.True(t, n.Spec.Unschedulable)

			// A second Create changes nothing.
			again, err := Cordon{}.Create(ctx, req)
			require.NoError(t, err)
			assert.Equal(t, tt.wantWasSchedulable, again.Outputs["wasSchedulable"])
			assert.Equal(t, "vsphere://4201-n1", again.Outputs["providerID"])

			_, err = Cordon{}.Delete(ctx, req)
			require.NoError(t, err)
			n, err = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, !tt.wantUncordoned, n.Spec.Unschedulable)
			if tt.wantUncordoned {
				assert.NotContains(t, n.Annotations, CordonedByAnnotation)
			}
		})
	}
}

func TestCordonTeardownOfAGoneNodeIsDone(t *testing.T) {
	res, err := Cordon{}.Delete(context.Background(), request(t, Cordon{}, fake.NewClientset(), map[string]string{"node": "n1"}))
	require.NoError(t, err)
	assert.True(t, res.Done)
}
