// Package pipelineops holds what a user may do to a Pipeline, the same from the kubectl
// plugin and the dashboard: ask for a retry, suspend, resume (each one patch), and plan one
// with a dry run (Planner). All is done with the caller's credentials, so RBAC decides.
package pipelineops

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
)

// Retry asks the operator to retry the failed pipeline ns/name from step (empty: its
// failed step), by setting the retry annotation, which the operator removes once it has
// recorded the retry. It refuses what the engine would ignore: a pipeline that has not
// failed, a step it does not have. It returns the pipeline as it read it.
func Retry(ctx context.Context, client clientset.Interface, ns, name, step string) (*v1alpha1.Pipeline, error) {
	pipelines := client.StepwiseV1alpha1().Pipelines(ns)
	p, err := pipelines.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get pipeline %s/%s: %w", ns, name, err)
	}
	if step != "" && !slices.ContainsFunc(p.Spec.Steps, func(s v1alpha1.Step) bool { return s.Name == step }) {
		return nil, fmt.Errorf("pipeline %s/%s has no step %q", ns, name, step)
	}
	if !p.Failed() {
		return nil, fmt.Errorf("pipeline %s/%s has not failed (phase %s): there is nothing to retry", ns, name, p.Status.Phase)
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{v1alpha1.RetryAnnotation: step}},
	})
	if err != nil {
		return nil, fmt.Errorf("encode patch: %w", err)
	}
	if _, err := pipelines.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return nil, fmt.Errorf("annotate pipeline %s/%s for a retry: %w", ns, name, err)
	}
	return p, nil
}

// SetSuspend sets spec.suspend of pipeline ns/name: a merge patch of the one field, no
// read-modify-write race with the operator or another user.
func SetSuspend(ctx context.Context, client clientset.Interface, ns, name string, suspend bool) (*v1alpha1.Pipeline, error) {
	patch := fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, suspend)
	p, err := client.StepwiseV1alpha1().Pipelines(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("set spec.suspend=%t on pipeline %s/%s: %w", suspend, ns, name, err)
	}
	return p, nil
}
