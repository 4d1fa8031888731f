package trigger

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/semantic"
)

// syncUndecodable handles a trigger the operator cannot decode: it watches nothing and
// starts nothing, and says why on the object (Ready=False, reason Undecodable, a Warning
// Event) while every other trigger is served. Its pipelines stay as they are.
func (c *Controller) syncUndecodable(ctx context.Context, key cache.ObjectName, trig *v1alpha1.PipelineTrigger, decodeErr error) (time.Duration, error) {
	c.objects.Unwatch(key)
	message := fmt.Sprintf("the operator cannot decode this trigger (%v): it starts nothing until it is fixed", decodeErr)
	conditions := append([]metav1.Condition(nil), trig.Status.Conditions...)
	meta.SetStatusCondition(&conditions, metav1.Condition{
		Type:               v1alpha1.ConditionReady,
		Status:             metav1.ConditionFalse,
		Reason:             v1alpha1.ReasonUndecodable,
		Message:            truncate(message, maxMessage),
		ObservedGeneration: trig.Generation,
		LastTransitionTime: metav1.NewTime(c.clock.Now()),
	})
	if semantic.Equal(conditions, trig.Status.Conditions) && trig.Status.ObservedGeneration == trig.Generation {
		return 0, nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"observedGeneration": trig.Generation, "conditions": conditions}})
	if err != nil {
		return 0, fmt.Errorf("marshal status patch: %w", err)
	}
	err = c.raw.Patch(ctx, trig.Namespace, trig.Name, patch, "status")
	if apierrors.IsInvalid(err) {
		// The API server validates the stored spec with the status, and may refuse it
		// for the very value that cannot be decoded: the Event is then all it gets.
		message += "; its status cannot be written: the API server refuses the stored spec"
		err = nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("patch status of trigger %s that cannot be decoded: %w", key, err)
	}
	c.recorder.Eventf(trig, corev1.EventTypeWarning, v1alpha1.ReasonUndecodable, "%s", truncate(message, maxMessage))
	return 0, nil
}
