package node

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// Cordon is node.cordon: it marks the node unschedulable. Output wasSchedulable tells
// whether it was schedulable before this pipeline cordoned it; output providerID is the
// node's spec.providerID (e.g. vsphere://<uuid>), so that a later step can terminate the
// machine at the cloud after the Node object is gone. Teardown uncordons the node
// only if this pipeline cordoned it and the node still exists.
type Cordon struct{ executor.Base }

func (Cordon) Name() string { return "node.cordon" }

func (Cordon) Create(ctx context.Context, req *executor.Request) (contract.Result, error) {
	client, err := kubeClient(req)
	if err != nil {
		return contract.Result{}, err
	}
	name, err := nodeName(req)
	if err != nil {
		return contract.Result{}, err
	}
	node, err := getNode(ctx, client, name)
	if err != nil {
		return contract.Result{}, err
	}
	outputs := cordonOutputs(node, req.Pipeline.UID)
	if node.Spec.Unschedulable {
		// Cordoned already: by us on an earlier attempt, or by someone else.
		return contract.DoneWithOutputs("node was already cordoned", outputs), nil
	}
	if err := patchCordon(ctx, client, name, true, req.Pipeline.UID); err != nil {
		return contract.Result{}, err
	}
	return contract.DoneWithOutputs("node cordoned", outputs), nil
}

// Plan reads the node as Create does and tells whether Create would cordon it, with the
// outputs it would give.
func (Cordon) Plan(ctx context.Context, req *executor.Request) (contract.Plan, error) {
	client, err := kubeClient(req)
	if err != nil {
		return contract.Plan{}, err
	}
	name, err := nodeName(req)
	if err != nil {
		return contract.Plan{}, err
	}
	node, err := getNode(ctx, client, name)
	if err != nil {
		return contract.Plan{}, err
	}
	outputs := cordonOutputs(node, req.Pipeline.UID)
	if node.Spec.Unschedulable {
		note := "cordoned by someone else: teardown leaves it cordoned"
		if cordonedBy(node, req.Pipeline.UID) {
			note = "cordoned by this pipeline already"
		}
		return contract.Plan{
			Summary: fmt.Sprintf("node %s is already cordoned", name),
			Details: []contract.PlanItem{{Kind: "Node", Name: name, Action: "unchanged", Note: note}},
			Outputs: outputs,
		}, nil
	}
	return contract.Plan{
		Summary: "cordon node " + name,
		Details: []contract.PlanItem{{Kind: "Node", Name: name, Action: "cordon", Note: "teardown uncordons it"}},
		Outputs: outputs,
	}, nil
}

// cordonedBy tells whether the pipeline with the given UID cordoned node.
func cordonedBy(node *corev1.Node, pipelineUID string) bool {
	return node.Annotations[CordonedByAnnotation] == pipelineUID
}

// cordonOutputs are node.cordon's outputs, from the node as it was before the cordon: a
// node cordoned already counts as schedulable only if this pipeline cordoned it (an
// earlier attempt), so that the output does not change between attempts.
func cordonOutputs(node *corev1.Node, pipelineUID string) map[string]string {
	was := !node.Spec.Unschedulable || cordonedBy(node, pipelineUID)
	return map[string]string{"wasSchedulable": strconv.FormatBool(was), "providerID": node.Spec.ProviderID}
}

func (Cordon) Delete(ctx context.Context, req *executor.Request) (contract.Result, error) {
	client, err := kubeClient(req)
	if err != nil {
		return contract.Result{}, err
	}
	name, err := nodeName(req)
	if err != nil {
		return contract.Result{}, err
	}
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return contract.Done("node is gone"), nil
	}
	if err != nil {
		return contract.Result{}, fmt.Errorf("get node %q: %w", name, err)
	}
	if !cordonedBy(node, req.Pipeline.UID) {
		return contract.Done("left as it was: this pipeline did not cordon it"), nil
	}
	if err := patchCordon(ctx, client, name, false, ""); err != nil {
		return contract.Result{}, err
	}
	return contract.Done("node uncordoned"), nil
}

// patchCordon sets spec.unschedulable and the ownership annotation in one patch, so a node
// is never cordoned without saying by whom.
func patchCordon(ctx context.Context, client kubernetes.Interface, name string, cordon bool, owner string) error {
	var annotation any // null removes it
	if owner != "" {
		annotation = owner
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{CordonedByAnnotation: annotation}},
		"spec":     map[string]any{"unschedulable": cordon},
	})
	if err != nil {
		return fmt.Errorf("marshal cordon patch: %w", err)
	}
	if _, err := client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "stepwise"}); err != nil {
		verb := "cordon"
		if !cordon {
			verb = "uncordon"
		}
		return fmt.Errorf("%s node %q: %w", verb, name, err)
	}
	return nil
}

// Describe documents node.cordon for the executor catalogue.
func (Cordon) Describe() contract.Description {
	return contract.Description{
		Description: "Marks the node unschedulable; outputs wasSchedulable and providerID. " +
			"Teardown uncordons it only if this pipeline cordoned it.",
		Parameters: []contract.Parameter{nodeParam()},
	}
}
