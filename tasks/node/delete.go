package node

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// Delete is node.delete: it deletes the Node object, once the machine behind it is gone.
// A node already gone is done. Its teardown does nothing: a Node comes back by itself when
// a kubelet registers it.
type Delete struct{ executor.Base }

func (Delete) Name() string { return "node.delete" }

func (Delete) Create(ctx context.Context, req *executor.Request) (contract.Result, error) {
	client, err := kubeClient(req)
	if err != nil {
		return contract.Result{}, err
	}
	name, err := nodeName(req)
	if err != nil {
		return contract.Result{}, err
	}
	err = client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return contract.DoneWithOutputs("node was already gone", map[string]string{"deleted": "false"}), nil
	}
	if err != nil {
		return contract.Result{}, fmt.Errorf("delete node %q: %w", name, err)
	}
	return contract.DoneWithOutputs("node deleted", map[string]string{"deleted": "true"}), nil
}

// Plan tells whether Create would find a Node to delete. Reading it takes the right to get
// Nodes, which the delete itself does not: a plan that may not look says so in a warning
// instead of failing a step that would succeed.
func (Delete) Plan(ctx context.Context, req *executor.Request) (contract.Plan, error) {
	client, err := kubeClient(req)
	if err != nil {
		return contract.Plan{}, err
	}
	name, err := nodeName(req)
	if err != nil {
		return contract.Plan{}, err
	}
	_, err = client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return contract.Plan{
			Summary: fmt.Sprintf("node %s is already gone", name),
			Details: []contract.PlanItem{{Kind: "Node", Name: name, Action: "unchanged", Note: "already gone"}},
			Outputs: map[string]string{"deleted": "false"},
		}, nil
	case apierrors.IsForbidden(err):
		// Whether it is there is unknown, and so is the output.
		return contract.Plan{
			Summary:  "delete node " + name,
			Details:  []contract.PlanItem{{Kind: "Node", Name: name, Action: "delete", Note: "not read: it may be gone already"}},
			Warnings: []string{fmt.Sprintf("cannot read node %s: %v", name, err)},
		}, nil
	case err != nil:
		return contract.Plan{}, fmt.Errorf("get node %q: %w", name, err)
	}
	return contract.Plan{
		Summary: "delete node " + name,
		Details: []contract.PlanItem{{Kind: "Node", Name: name, Action: "delete"}},
		Outputs: map[string]string{"deleted": "true"},
	}, nil
}

// Describe documents node.delete for the executor catalogue.
func (Delete) Describe() contract.Description {
	return contract.Description{
		Description: "Deletes the Node object; a node already gone is fine. Teardown does nothing.",
		Parameters:  []contract.Parameter{nodeParam()},
	}
}
