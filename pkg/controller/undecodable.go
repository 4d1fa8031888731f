package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/semantic"
)

// syncUndecodable handles a pipeline the operator cannot decode: it runs nothing, and says
// so on the object (Ready=False, reason Undecodable, a Warning Event) so that its owner
// can fix it, while every other pipeline is served. When it is deleted, its finalizer
// comes off at once if none of its steps ran Create (the usual case: what cannot be
// decoded never ran) or when the teardown-policy annotation says Orphan; otherwise the
// teardown waits for a spec it can read, and the condition says both ways out.
func (c *Controller) syncUndecodable(ctx context.Context, p *v1alpha1.Pipeline, decodeErr error) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	if p.DeletionTimestamp != nil {
		if !slices.Contains(p.Finalizers, v1alpha1.Finalizer) {
			return 0, nil
		}
		orphan := p.Annotations[v1alpha1.TeardownPolicyAnnotation] == v1alpha1.TeardownOrphan
		if !ranCreate(&p.Status) || orphan {
			if orphan {
				undecodableOrphaned().recordOn(c.recorder, p)
			}
			logger.Info("Removing the finalizer of a pipeline that cannot be decoded", "orphan", orphan)
			return 0, c.patchRaw(ctx, p, finalizersPatch(p), "")
		}
	}
	message := fmt.Sprintf("the operator cannot decode this pipeline (%v): nothing runs until it is fixed", decodeErr)
	if p.DeletionTimestamp != nil {
		message = fmt.Sprintf("the operator cannot decode this pipeline (%v): its teardown waits; fix the spec, or annotate %s=%s to leave what its steps created",
			decodeErr, v1alpha1.TeardownPolicyAnnotation, v1alpha1.TeardownOrphan)
	}
	status := p.Status.DeepCopy()
	status.ObservedGeneration = p.Generation
	status.Phase = v1alpha1.PipelineFailed
	// Ready False and, for GitOps tools (kstatus), Stalled: nothing happens until a person
	// fixes the object.
	meta.RemoveStatusCondition(&status.Conditions, v1alpha1.ConditionReconciling)
	for _, cond := range []struct {
		kind  string
		value metav1.ConditionStatus
	}{{v1alpha1.ConditionReady, metav1.ConditionFalse}, {v1alpha1.ConditionStalled, metav1.ConditionTrue}} {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type:               cond.kind,
			Status:             cond.value,
			Reason:             v1alpha1.ReasonUndecodable,
			Message:            contract.Truncate(message, v1alpha1.MaxStepMessageLength),
			ObservedGeneration: p.Generation,
			LastTransitionTime: metav1.NewTime(c.clock.Now()),
		})
	}
	if semantic.Equal(&p.Status, status) {
		return 0, nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"observedGeneration": status.ObservedGeneration, "phase": status.Phase, "conditions": status.Conditions,
	}})
	if err != nil {
		return 0, fmt.Errorf("marshal status patch: %w", err)
	}
	err = c.patchRaw(ctx, p, patch, "status")
	if apierrors.IsInvalid(err) {
		// The API server validates the stored spec with the status, and may refuse it
		// for the very value that cannot be decoded: the Event is then all it gets.
		message += "; its status cannot be written: the API server refuses the stored spec"
		err = nil
	}
	if err != nil {
		return 0, err
	}
	undecodable(message).recordOn(c.recorder, p)
	return 0, nil
}

// ranCreate: a step, current or retired, has a run record, so it has something to tear
// down.
func ranCreate(s *v1alpha1.PipelineStatus) bool {
	has := func(steps []v1alpha1.StepStatus) bool {
		return slices.ContainsFunc(steps, func(st v1alpha1.StepStatus) bool { return st.Ran != nil })
	}
	return has(s.Steps) || has(s.RetiredSteps)
}

// finalizersPatch removes the engine's finalizer, failing rather than overwriting a change
// the cache has not seen.
func finalizersPatch(p *v1alpha1.Pipeline) []byte {
	rest := slices.DeleteFunc(slices.Clone(p.Finalizers), func(f string) bool { return f == v1alpha1.Finalizer })
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": rest, "resourceVersion": p.ResourceVersion}})
	return patch
}

func (c *Controller) patchRaw(ctx context.Context, p *v1alpha1.Pipeline, patch []byte, subresource string) error {
	var sub []string
	if subresource != "" {
		sub = []string{subresource}
	}
	err := c.raw.Patch(ctx, p.Namespace, p.Name, patch, sub...)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patch pipeline %s/%s that cannot be decoded: %w", p.Namespace, p.Name, err)
	}
	return nil
}
