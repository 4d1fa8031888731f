package trigger

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// adopt stamps the trigger's UID on a pipeline an earlier version made for it, on
// condition that it is still the pipeline we saw, and returns it as the API server has it
// then; nil when it is gone, or another pipeline has its name (the patch's test fails:
// Invalid), which the cache shows us at a later sync.
func (ts *triggerSync) adopt(ctx context.Context, p *v1alpha1.Pipeline) (*v1alpha1.Pipeline, error) {
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": p.UID},
		{"op": "add", "path": "/metadata/labels/" + jsonPointerEscape(v1alpha1.LabelTriggerUID), "value": string(ts.trig.UID)},
	})
	if err != nil {
		return nil, fmt.Errorf("marshal the adoption patch of pipeline %s/%s: %w", p.Namespace, p.Name, err)
	}
	adopted, err := ts.c.client.StepwiseV1alpha1().Pipelines(p.Namespace).Patch(ctx, p.Name, types.JSONPatchType, patch,
		metav1.PatchOptions{FieldManager: ControllerName})
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stamp trigger %s's UID on pipeline %s/%s: %w", ts.key, p.Namespace, p.Name, err)
	}
	ts.c.pipelines.Mutation(adopted)
	klog.FromContext(ctx).V(2).Info("Adopted a pipeline made before pipelines carried their trigger's UID",
		"trigger", ts.key, "pipeline", klog.KObj(adopted))
	return adopted, nil
}

// jsonPointerEscape escapes a key for a JSON pointer (RFC 6901).
func jsonPointerEscape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}
