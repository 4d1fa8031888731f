package framework

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// OpenGate opens the gate of step in the ConfigMap test.record keeps for a pipeline
// (configMap, in ns): data open.STEP set to value. A merge patch, since test.record writes
// the same ConfigMap as it records each look at the gate: an update from a read would
// conflict with it.
func OpenGate(ctx context.Context, kube kubernetes.Interface, ns, configMap, step, value string) error {
	patch, err := json.Marshal(map[string]any{"data": map[string]string{"open." + step: value}})
	if err != nil {
		return fmt.Errorf("marshal the patch opening gate %s: %w", step, err)
	}
	if _, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, configMap, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("open gate %s in ConfigMap %s/%s: %w", step, ns, configMap, err)
	}
	return nil
}
