package node

import (
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A Deployment a HorizontalPodAutoscaler scales is surged through the autoscaler: the
// drain raises its minReplicas (and maxReplicas, if it must) by the surge, and the
// autoscaler scales the Deployment up; scaling the Deployment itself would be undone by
// the autoscaler at its next sync. The record goes on the autoscaler, in the same patch,
// and the autoscaler gets back the bounds it had when the drain ends, fails or is torn
// down. The Deployment's replicas are the autoscaler's to bring down again, as its metrics
// say.

// autoscalerRecord is SurgedByAnnotation's value on a HorizontalPodAutoscaler.
type autoscalerRecord struct {
	Pipeline string `json:"pipeline"`
	// MinReplicas and MaxReplicas are the autoscaler's bounds before the surge; Replicas
	// the Deployment's replicas then.
	MinReplicas int32 `json:"minReplicas"`
	MaxReplicas int32 `json:"maxReplicas"`
	Replicas    int32 `json:"replicas"`
	Surge       int32 `json:"surge"`
}

func (r autoscalerRecord) owner() string { return r.Pipeline }

// autoscalerOf is the HorizontalPodAutoscaler that scales d, or nil: none, or none the
// pipeline's ServiceAccount may list (then the drain scales the Deployment itself, and its
// message says the autoscaler may undo it). Each namespace is listed once per call.
func (s *surger) autoscalerOf(d *appsv1.Deployment) (*autoscalingv2.HorizontalPodAutoscaler, string, error) {
	list, ok := s.autoscalers[d.Namespace]
	if !ok {
		got, err := s.client.AutoscalingV2().HorizontalPodAutoscalers(d.Namespace).List(s.ctx, metav1.ListOptions{})
		switch {
		case apierrors.IsForbidden(err):
			s.autoscalers[d.Namespace] = nil
			return nil, "the pipeline's ServiceAccount may not list HorizontalPodAutoscalers in " + d.Namespace + ": one that scales the Deployment would undo the surge", nil
		case err != nil:
			return nil, "", fmt.Errorf("list the HorizontalPodAutoscalers of %s: %w", d.Namespace, err)
		}
		list = got.Items
		s.autoscalers[d.Namespace] = list
	}
	for i := range list {
		ref := list[i].Spec.ScaleTargetRef
		if ref.Kind == "Deployment" && ref.Name == d.Name && strings.HasPrefix(ref.APIVersion, "apps/") {
			return &list[i], "", nil
		}
	}
	return nil, "", nil
}

// readAutoscalerSurge reads a's SurgedByAnnotation; a value that does not parse is none.
func readAutoscalerSurge(a *autoscalingv2.HorizontalPodAutoscaler) (autoscalerRecord, bool) {
	return readRecord[autoscalerRecord](a.Annotations)
}

// surgeThrough raises a's bounds so that it scales d up by surge, with the record.
func (s *surger) surgeThrough(a *autoscalingv2.HorizontalPodAutoscaler, d *appsv1.Deployment, surge int32) (int32, error) {
	oldMin, oldMax := ptrValue(a.Spec.MinReplicas, 1), a.Spec.MaxReplicas
	replicas := ptrValue(d.Spec.Replicas, 1)
	floor := max(oldMin, replicas+surge)
	rec := &autoscalerRecord{Pipeline: s.uid, MinReplicas: oldMin, MaxReplicas: oldMax, Replicas: replicas, Surge: surge}
	return floor, s.setBounds(a, floor, max(oldMax, floor), rec)
}

// restoreAutoscaler gives the autoscaler of Deployment key (ns/name) back the bounds it had
// before this pipeline's surge, and removes the record, in one patch; bounds someone
// changed since stay theirs. It does nothing to an autoscaler this pipeline did not raise.
func (s *surger) restoreAutoscaler(d *appsv1.Deployment) (string, error) {
	a, _, err := s.autoscalerOf(d)
	if err != nil || a == nil {
		return "", err
	}
	rec, ok := readAutoscalerSurge(a)
	if !ok || rec.Pipeline != s.uid {
		return "", nil
	}
	minNow, maxNow := ptrValue(a.Spec.MinReplicas, 1), a.Spec.MaxReplicas
	raised := max(rec.MinReplicas, rec.Replicas+rec.Surge)
	if minNow != raised || maxNow != max(rec.MaxReplicas, raised) {
		if err := s.setBounds(a, minNow, maxNow, nil); err != nil {
			return "", err
		}
		return fmt.Sprintf("HorizontalPodAutoscaler %s/%s left at the bounds someone set since the drain raised them", a.Namespace, a.Name), nil
	}
	if err := s.setBounds(a, rec.MinReplicas, rec.MaxReplicas, nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("HorizontalPodAutoscaler %s/%s back to minReplicas %d", a.Namespace, a.Name, rec.MinReplicas), nil
}

// setBounds sets a's minReplicas and maxReplicas and its SurgedByAnnotation to rec
// (removed when rec is nil), in one JSON patch whose tests make it fail rather than act on
// an autoscaler whose bounds or record changed since it was read.
func (s *surger) setBounds(a *autoscalingv2.HorizontalPodAutoscaler, minReplicas, maxReplicas int32, rec *autoscalerRecord) error {
	var ops []map[string]any
	if a.Spec.MinReplicas != nil {
		ops = append(ops, map[string]any{"op": "test", "path": "/spec/minReplicas", "value": *a.Spec.MinReplicas})
	}
	ops = append(ops, map[string]any{"op": "test", "path": "/spec/maxReplicas", "value": a.Spec.MaxReplicas})
	var value any
	if rec != nil {
		data, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("marshal the surge record: %w", err)
		}
		value = string(data)
	}
	ops = append(ops, annotationOps(a.Annotations, value)...)
	ops = append(ops,
		map[string]any{"op": "add", "path": "/spec/minReplicas", "value": minReplicas},
		map[string]any{"op": "replace", "path": "/spec/maxReplicas", "value": maxReplicas})
	patch, err := json.Marshal(ops)
	if err != nil {
		return fmt.Errorf("marshal the bounds patch: %w", err)
	}
	patched, err := s.client.AutoscalingV2().HorizontalPodAutoscalers(a.Namespace).Patch(s.ctx, a.Name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: "stepwise"})
	if err != nil {
		return fmt.Errorf("set the bounds of HorizontalPodAutoscaler %s/%s to %d..%d: %w", a.Namespace, a.Name, minReplicas, maxReplicas, err)
	}
	*a = *patched // as this call's other pods of the Deployment see it
	return nil
}

// annotationOps are the JSON patch operations that test SurgedByAnnotation as read from
// annotations and set it to value (a string), or remove it (value nil).
func annotationOps(annotations map[string]string, value any) []map[string]any {
	path := "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(SurgedByAnnotation, "~", "~0"), "/", "~1")
	var ops []map[string]any
	old, had := annotations[SurgedByAnnotation]
	if had {
		ops = append(ops, map[string]any{"op": "test", "path": path, "value": old})
	}
	switch {
	case value != nil:
		if annotations == nil {
			ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{}})
		}
		ops = append(ops, map[string]any{"op": "add", "path": path, "value": value})
	case had:
		ops = append(ops, map[string]any{"op": "remove", "path": path})
	}
	return ops
}
