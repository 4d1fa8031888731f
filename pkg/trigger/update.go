package trigger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// objectChanged handles an object whose bound params differ from its pipeline's. When both
// the trigger and the pipeline have updatePolicy Rerun, the pipeline's params are patched,
// and the engine runs it again; a re-run is not held back by the concurrency budget (the
// pipeline has its place already), but waits while the trigger's own hold holds (holdOf:
// suspended, paused, its template missing, ...). Otherwise the pipeline is left as it is,
// and an Event says so, once for each new set of params. A pipeline created Immutable stays
// so, even if the trigger turned to Rerun since: the API server refuses to change its
// params.
func (ts *triggerSync) objectChanged(ctx context.Context, obj *unstructured.Unstructured, p *v1alpha1.Pipeline, params map[string]string) error {
	if p.DeletionTimestamp != nil || p.UID == "" || p.HasParams(params) {
		delete(ts.mem.changed, p.UID)
		return nil
	}
	changed := "its params" // the cache left the pipeline's values out: which changed is not known
	if p.Elided == nil {
		changed = changedParams(p.Spec.Params, params)
	}
	name := ts.objectName(obj)
	if ts.trig.Spec.UpdatePolicy == v1alpha1.UpdateRerun && p.Spec.UpdatePolicy == v1alpha1.UpdateRerun {
		if ts.holdOf() != holdNone {
			return nil
		}
		if err := ts.patchParams(ctx, p, params); err != nil {
			return err
		}
		ts.event(corev1.EventTypeNormal, v1alpha1.TriggerReasonObjectChanged, "%s changed: pipeline %s runs again with %s changed", name, p.Name, changed)
		return nil
	}
	digest := paramsDigest(params)
	if ts.mem.changed[p.UID] == digest {
		return nil
	}
	ts.mem.changed[p.UID] = digest
	ts.event(corev1.EventTypeNormal, v1alpha1.TriggerReasonObjectChanged,
		"%s changed %s, but pipeline %s is immutable (updatePolicy %s): it keeps its params; delete it for the trigger to run a new one",
		name, changed, p.Name, p.Spec.UpdatePolicy)
	return nil
}

// patchParams replaces the pipeline's params with a JSON patch that fails if the pipeline
// is no longer the one we saw.
func (ts *triggerSync) patchParams(ctx context.Context, p *v1alpha1.Pipeline, params map[string]string) error {
	ops := []map[string]any{{"op": "test", "path": "/metadata/uid", "value": p.UID}}
	if len(params) == 0 {
		ops = append(ops, map[string]any{"op": "remove", "path": "/spec/params"})
	} else {
		ops = append(ops, map[string]any{"op": "add", "path": "/spec/params", "value": params})
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return fmt.Errorf("marshal params patch: %w", err)
	}
	updated, err := ts.c.client.StepwiseV1alpha1().Pipelines(p.Namespace).Patch(ctx, p.Name, types.JSONPatchType, patch,
		metav1.PatchOptions{FieldManager: ControllerName})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update the params of pipeline %s/%s: %w", p.Namespace, p.Name, err)
	}
	ts.c.pipelines.Mutation(updated)
	return nil
}

// changedParams names the params that differ, e.g. "params.image and params.tag".
func changedParams(old, new map[string]string) string {
	var names []string
	for _, k := range slices.Sorted(maps.Keys(old)) {
		if v, ok := new[k]; !ok || v != old[k] {
			names = append(names, "params."+k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(new)) {
		if _, ok := old[k]; !ok {
			names = append(names, "params."+k)
		}
	}
	slices.Sort(names)
	return strings.Join(names, " and ")
}

// paramsDigest identifies a set of params in the trigger's memory: a short hash and the
// length, so that remembering it costs little whatever the params' size.
func paramsDigest(params map[string]string) string {
	data, _ := json.Marshal(params) // sorted keys
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:4]) + fmt.Sprint(len(data))
}
