package node

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
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

// nodeName returns the "node" parameter. The engine made sure it is set; whether it can
// name a Node is for the executor to say: an empty value (a reference to an empty output)
// or one that is no DNS subdomain would otherwise fail every retry at the API server.
func nodeName(req *executor.Request) (string, error) {
	name := req.String("node")
	if name == "" {
		return "", invalidParam("node", errors.New("is empty: it names no Node"))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", invalidParam("node", fmt.Errorf("is %q, not a Node name: %s", name, strings.Join(errs, "; ")))
	}
	return name, nil
}

// invalidParam is the permanent error of a parameter the engine's checks let through but
// the executor cannot use, in the engine's shape: parameter "NAME" WHAT.
func invalidParam(name string, err error) error {
	return contract.Permanent(contract.ReasonInvalidParameter, fmt.Errorf("parameter %q %w", name, err))
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
