package node

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// kubeClient returns the impersonating client of the request.
func kubeClient(req *executor.Request) (kubernetes.Interface, error) {
	if req.Clients == nil || req.Clients.Kube == nil {
		return nil, contract.Permanent("NoClient", errors.New("no Kubernetes client was given to the executor"))
	}
	return req.Clients.Kube, nil
}

// nodeName returns the required "node" parameter.
func nodeName(req *executor.Request) (string, error) {
	name := req.Params["node"]
	if name == "" {
		return "", contract.Permanent("InvalidParameter", errors.New(`parameter "node" is required`))
	}
	return name, nil
}

// getNode reads a node; a node that does not exist is a permanent error, as no retry
// brings it back.
func getNode(ctx context.Context, client kubernetes.Interface, name string) (*corev1.Node, error) {
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, contract.Permanent("NodeNotFound", fmt.Errorf("node %q not found", name))
	}
	if err != nil {
		return nil, fmt.Errorf("get node %q: %w", name, err)
	}
	return node, nil
}
