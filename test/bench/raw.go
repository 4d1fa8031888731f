package main

import (
	"context"
	"errors"
	"fmt"
	"os"
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
	// BenchCPUSeconds is the benchmark process' CPU meanwhile (its clients and the
	// tracker's watch): the machine's share that neither the API server nor an operator had.
	BenchCPUSeconds float64 `json:"benchCpuSeconds"`
}

// writeLimit is the fastest rate at which a run can make `writes` pipeline writes: no
// faster than the raw Pipeline test wrote (raw writes/s: where the API server binds, its
// share of the machine) and no faster than a client with qps and burst allows that many
// writes (a burst, then qps a second). The raw test writes few enough for its burst to
// count; a longer run, as filling the cache, cannot keep that pace with the same settings.
func writeLimit(raw, writes, qps float64, burst int) float64 {
	if qps <= 0 || writes <= float64(burst) {
		return raw
	}
	return min(raw, writes*qps/(writes-float64(burst)))
}

// rawObjects is what a raw test of ConfigMaps writes: object i created and written once
// more, two counted writes each.
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

// measureRawPipelines measures what a minimal controller achieves with the operator's
// client settings: a run's requests in a run's shape. The benchmark's creators (an
// unthrottled client) create n Pipelines of spec as fast as they can, as in a run, and
// workers goroutines take each created Pipeline and make the engine's two writes one after
// the other, with the operator's client settings: a merge patch of its metadata (as the
// finalizer patch, on an annotation: these are deleted before any operator runs) and its
// status updated as the engine's would be once its steps ran. The two writes are counted,
// from the first create to the last status. Where the client settings do not bind (QPS
// 1000 on two cores) the API server does, and the creates take their share of it in both.
func measureRawPipelines(ctx context.Context, base *rest.Config, ns, label string, n, creators, workers int, qps float64, burst int, spec pipelineSpec) (rawResult, error) {
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
	r := rawPipelines{client: client, creator: creator, ns: ns, label: label, spec: spec}
	return timeRawWrites(ctx, r, label, n, workers, qps, burst, func(ctx context.Context) error {
		created := make(chan *v1alpha1.Pipeline, n) // never blocks a creator
		createCtx, stopCreating := context.WithCancel(ctx)
		defer stopCreating()
		var createErr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer close(created)
			createErr = forEach(createCtx, n, creators, func(ctx context.Context, i int) error {
				p, err := r.create(ctx, i)
				if err == nil {
					created <- p
				}
				return err
			})
		}()
		writeErr := forEach(ctx, n, workers, func(ctx context.Context, _ int) error {
			select {
			case p, ok := <-created:
				if !ok {
					return errors.New("a pipeline was not created")
				}
				return r.write(ctx, p)
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		stopCreating() // a failed write leaves the creators nothing to do
		<-done
		return errors.Join(createErr, writeErr)
	})
}

func measureRawWrites(ctx context.Context, objects rawObjects, label string, n, workers int, qps float64, burst int) (rawResult, error) {
	return timeRawWrites(ctx, objects, label, n, workers, qps, burst, func(ctx context.Context) error {
		return forEach(ctx, n, workers, objects.createAndUpdate)
	})
}

// timeRawWrites times write, which makes two counted writes for each of n objects within
// 5 minutes, and deletes the objects.
func timeRawWrites(ctx context.Context, objects interface{ deleteAll(context.Context) error }, label string, n, workers int,
	qps float64, burst int, write func(context.Context) error) (rawResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cpuBefore, err := cpuSeconds(os.Getpid())
	if err != nil {
		return rawResult{}, err
	}
	start := time.Now()
	feedErr := write(ctx)
	elapsed := time.Since(start)
	cpuAfter, err := cpuSeconds(os.Getpid())
	if err != nil {
		return rawResult{}, err
	}
	cleanupErr := objects.deleteAll(ctx)
	if feedErr != nil {
		return rawResult{}, feedErr
	}
	if cleanupErr != nil {
		return rawResult{}, cleanupErr
	}
	return rawResult{
		Label: label, Writes: 2 * n, Workers: workers, QPS: qps, Burst: burst,
		Seconds: elapsed.Seconds(), WritesPerSec: float64(2*n) / elapsed.Seconds(), BenchCPUSeconds: cpuAfter - cpuBefore,
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

// create makes pipeline i as the benchmark's creators do.
func (r rawPipelines) create(ctx context.Context, i int) (*v1alpha1.Pipeline, error) {
	p := r.spec.pipeline(r.ns, fmt.Sprintf("raw-%s-%05d", r.label, i))
	p.Labels = map[string]string{"bench": r.label}
	created, err := r.creator.StepwiseV1alpha1().Pipelines(r.ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pipeline %s: %w", p.Name, err)
	}
	return created, nil
}

// write makes the engine's two writes of a created pipeline: its metadata, then its status.
func (r rawPipelines) write(ctx context.Context, p *v1alpha1.Pipeline) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"bench.stepwise.dev/raw":"patched"},"resourceVersion":%q}}`, p.ResourceVersion)
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
