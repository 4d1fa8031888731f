package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
)

// rawResult is the write rate of a plain client: the writes each object of a raw test
// counts, over the test's time.
type rawResult struct {
	Label        string  `json:"label"`
	Writes       int     `json:"writes"`
	Workers      int     `json:"workers"`
	QPS          float64 `json:"qps"`
	Burst        int     `json:"burst"`
	Seconds      float64 `json:"seconds"`
	WritesPerSec float64 `json:"writesPerSecond"`
}

// rawObjects is what a raw test writes: object i created and written once more (twice for
// a Pipeline), two counted writes each.
type rawObjects interface {
	createAndUpdate(ctx context.Context, i int) error
	deleteAll(ctx context.Context) error
}

// measureRaw creates n ConfigMaps and updates each once from workers goroutines, with a
// client limited to qps/burst as the operator's is (qps < 0: no client-side limit), then
// deletes them.
func measureRaw(ctx context.Context, base *rest.Config, ns, label string, n, workers int, qps float64, burst int) (rawResult, error) {
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = float32(qps), burst
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return rawResult{}, fmt.Errorf("create client: %w", err)
	}
	return measureRawWrites(ctx, rawConfigMaps{client: client, ns: ns, label: label}, label, n, workers, qps, burst)
}

// measureRawPipelines does the same with Pipelines of spec, as a pipeline costs the API
// server when the operator runs it: created by an unthrottled client (as the benchmark's
// creators make them), then, with the operator's client settings, a merge patch of its
// metadata (as the engine's finalizer patch, on an annotation: these are deleted before any
// operator runs) and its status updated as the engine's would be once its steps ran. The
// patch and the update are counted: the operator's pipeline writes. Where the client
// settings do not bind (QPS 1000 on two cores) the API server does, and the creates take
// their share of it in both.
func measureRawPipelines(ctx context.Context, base *rest.Config, ns, label string, n, workers int, qps float64, burst int, spec pipelineSpec) (rawResult, error) {
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = float32(qps), burst
	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		return rawResult{}, fmt.Errorf("create client: %w", err)
	}
	creator, err := clientset.NewForConfig(unthrottled(base))
	if err != nil {
		return rawResult{}, fmt.Errorf("create client: %w", err)
	}
	return measureRawWrites(ctx, rawPipelines{client: client, creator: creator, ns: ns, label: label, spec: spec}, label, n, workers, qps, burst)
}

func measureRawWrites(ctx context.Context, objects rawObjects, label string, n, workers int, qps float64, burst int) (rawResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()

	start := time.Now()
	feedErr := forEach(ctx, n, workers, objects.createAndUpdate)
	elapsed := time.Since(start)
	cleanupErr := objects.deleteAll(ctx)
	if feedErr != nil {
		return rawResult{}, feedErr
	}
	if cleanupErr != nil {
		return rawResult{}, cleanupErr
	}
	return rawResult{
		Label: label, Writes: 2 * n, Workers: workers, QPS: qps, Burst: burst,
		Seconds: elapsed.Seconds(), WritesPerSec: float64(2*n) / elapsed.Seconds(),
	}, nil
}

// rawConfigMaps are the ConfigMaps of a raw test.
type rawConfigMaps struct {
	client    kubernetes.Interface
	ns, label string
}

func (r rawConfigMaps) createAndUpdate(ctx context.Context, i int) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:   fmt.Sprintf("raw-%s-%05d", r.label, i),
		Labels: map[string]string{"bench": r.label},
	}, Data: map[string]string{"n": "0"}}
	got, err := r.client.CoreV1().ConfigMaps(r.ns).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create configmap %s: %w", cm.Name, err)
	}
	got.Data["n"] = strconv.Itoa(i)
	if _, err := r.client.CoreV1().ConfigMaps(r.ns).Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update configmap %s: %w", cm.Name, err)
	}
	return nil
}

func (r rawConfigMaps) deleteAll(ctx context.Context) error {
	if err := r.client.CoreV1().ConfigMaps(r.ns).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: "bench=" + r.label}); err != nil {
		return fmt.Errorf("delete the benchmark's configmaps: %w", err)
	}
	return nil
}

// rawPipelines are the Pipelines of a raw test.
type rawPipelines struct {
	client    clientset.Interface // the operator's settings
	creator   clientset.Interface // unthrottled
	ns, label string
	spec      pipelineSpec
}

func (r rawPipelines) createAndUpdate(ctx context.Context, i int) error {
	p := r.spec.pipeline(r.ns, fmt.Sprintf("raw-%s-%05d", r.label, i))
	p.Labels = map[string]string{"bench": r.label}
	created, err := r.creator.StepwiseV1alpha1().Pipelines(r.ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create pipeline %s: %w", p.Name, err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"bench.stepwise.dev/raw":"patched"},"resourceVersion":%q}}`, created.ResourceVersion)
	got, err := r.client.StepwiseV1alpha1().Pipelines(r.ns).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("patch pipeline %s: %w", p.Name, err)
	}
	now := metav1.Now()
	got.Status = v1alpha1.PipelineStatus{
		ObservedGeneration: got.Generation, Phase: v1alpha1.PipelineSucceeded, Progress: fmt.Sprintf("%d/%d", len(p.Spec.Steps), len(p.Spec.Steps)),
		StartTime: &now, CompletionTime: &now,
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSucceeded,
			Message: "all steps succeeded", ObservedGeneration: got.Generation, LastTransitionTime: now}},
	}
	for _, step := range p.Spec.Steps {
		got.Status.Steps = append(got.Status.Steps, v1alpha1.StepStatus{
			Name: step.Name, Executor: step.Executor, Phase: v1alpha1.StepSucceeded, Hook: v1alpha1.HookPostCreate,
			ObservedGeneration: got.Generation, Attempts: 1, StartTime: &now, CompletionTime: &now,
			Ran:        &v1alpha1.StepRun{Executor: step.Executor, StepHash: "0123456789abcdef", Generation: got.Generation},
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Completed", ObservedGeneration: got.Generation, LastTransitionTime: now}},
		})
	}
	if _, err := r.client.StepwiseV1alpha1().Pipelines(r.ns).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update the status of pipeline %s: %w", p.Name, err)
	}
	return nil
}

func (r rawPipelines) deleteAll(ctx context.Context) error {
	if err := r.client.StepwiseV1alpha1().Pipelines(r.ns).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: "bench=" + r.label}); err != nil {
		return fmt.Errorf("delete the benchmark's pipelines: %w", err)
	}
	return nil
}
