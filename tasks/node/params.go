// Package node holds the built-in executors that retire a node: node.cordon, node.drain and
// node.delete. They act through the client the engine gives them, which impersonates the
// pipeline's ServiceAccount, and never block: a drain evicts what it can and asks to be
// looked at again.
package node

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// Executors returns the node executors.
func Executors() []executor.TaskExecutor {
	return []executor.TaskExecutor{Cordon{}, Drain{}, Delete{}}
}

// CordonedByAnnotation marks a node this engine cordoned, with the pipeline's UID, so that
// only that pipeline's teardown uncordons it, even if a retried hook saw it cordoned already.
const CordonedByAnnotation = "stepwise.dev/cordoned-by"

// kubeClient returns the impersonating client of the request.
func kubeClient(req *executor.Request) (kubernetes.Interface, error) {
	if req.Clients == nil || req.Clients.Kube == nil {
		return nil, executor.Permanent("NoClient", errors.New("no Kubernetes client was given to the executor"))
	}
	return req.Clients.Kube, nil
}

// nodeName returns the required "node" parameter.
func nodeName(req *executor.Request) (string, error) {
	name := req.Params["node"]
	if name == "" {
		return "", executor.Permanent("InvalidParameter", errors.New(`parameter "node" is required`))
	}
	return name, nil
}

// getNode reads a node; a node that does not exist is a permanent error, as no retry
// brings it back.
func getNode(ctx context.Context, client kubernetes.Interface, name string) (*corev1.Node, error) {
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, executor.Permanent("NodeNotFound", fmt.Errorf("node %q not found", name))
	}
	if err != nil {
		return nil, fmt.Errorf("get node %q: %w", name, err)
	}
	return node, nil
}
