package node

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Reasons of the Node conditions node.drain sets: DrainInProgress and Drained, which the
// declarative node maintenance work added to core/v1 for whoever drains a node to set and
// clear, so that the drain's state is on the Node for every tool to read.
const (
	ReasonDrainStarted  = "StepwiseDrainStarted"
	ReasonDrainFinished = "StepwiseDrainFinished"
	ReasonDrainFailed   = "StepwiseDrainFailed"
	ReasonDrainUndone   = "StepwiseDrainTornDown"
)

// drainState is what node.drain says of a node through its two conditions.
type drainState struct {
	inProgress, drained bool
	reason, message     string
}

// setDrainConditions sets node's DrainInProgress and Drained conditions to state, with a
// strategic merge patch of its status that touches only those two (a kubelet's conditions
// stay), and only when one of them changes. It returns a note instead of an error when the
// pipeline's ServiceAccount may not patch nodes/status: the conditions tell others, the
// drain goes on without them.
func setDrainConditions(ctx context.Context, client kubernetes.Interface, node *corev1.Node, state drainState, now metav1.Time) (string, error) {
	var conditions []corev1.NodeCondition
	for _, c := range []struct {
		kind corev1.NodeConditionType
		set  bool
	}{{corev1.NodeDrainInProgress, state.inProgress}, {corev1.NodeDrained, state.drained}} {
		status := corev1.ConditionFalse
		if c.set {
			status = corev1.ConditionTrue
		}
		current := nodeCondition(node, c.kind)
		if current != nil && current.Status == status && current.Reason == state.reason {
			continue
		}
		transition := now
		if current != nil && current.Status == status {
			transition = current.LastTransitionTime
		}
		conditions = append(conditions, corev1.NodeCondition{Type: c.kind, Status: status, Reason: state.reason,
			Message: state.message, LastHeartbeatTime: now, LastTransitionTime: transition})
	}
	if len(conditions) == 0 {
		return "", nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conditions}})
	if err != nil {
		return "", fmt.Errorf("marshal the drain conditions of node %q: %w", node.Name, err)
	}
	_, err = client.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "stepwise"}, "status")
	switch {
	case apierrors.IsForbidden(err):
		return "the Node's DrainInProgress and Drained conditions are not set: the pipeline's ServiceAccount may not patch nodes/status", nil
	case err != nil:
		return "", fmt.Errorf("set the drain conditions of node %q: %w", node.Name, err)
	}
	return "", nil
}

// drainedByStepwise tells whether node's drain conditions are ones node.drain set.
func drainedByStepwise(node *corev1.Node) bool {
	for _, kind := range []corev1.NodeConditionType{corev1.NodeDrainInProgress, corev1.NodeDrained} {
		if c := nodeCondition(node, kind); c != nil {
			switch c.Reason {
			case ReasonDrainStarted, ReasonDrainFinished, ReasonDrainFailed:
				return true
			}
		}
	}
	return false
}

func nodeCondition(node *corev1.Node, kind corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == kind {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}
