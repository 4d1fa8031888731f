package node

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// Delete is node.delete: it deletes the Node object, once the machine behind it is gone.
// A node already gone is done. Its teardown does nothing: a Node comes back by itself when
// a kubelet registers it.
type Delete struct{ executor.Base }

func (Delete) Name() string { return "node.delete" }

func (Delete) Create(ctx context.Context, req *executor.Request) (executor.Result, error) {
	client, err := kubeClient(req)
	if err != nil {
		return executor.Result{}, err
	}
	name, err := nodeName(req)
	if err != nil {
		return executor.Result{}, err
	}
	err = client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return executor.DoneWithOutputs("node was already gone", map[string]string{"deleted": "false"}), nil
	}
	if err != nil {
		return executor.Result{}, fmt.Errorf("delete node %q: %w", name, err)
	}
	return executor.DoneWithOutputs("node deleted", map[string]string{"deleted": "true"}), nil
}
