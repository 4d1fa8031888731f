package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// hogNamespace is tenant A of the fairness phase; tenant B is the benchmark's namespace.
const hogNamespace = "bench-hog"

// fairnessResult is tenant B's apply→Ready, alone and while tenant A's hooks hang or are
// slow and retried.
type fairnessResult struct {
	Hanging   int         `json:"hanging"`
	Slow      int         `json:"slow"`
	Share     int         `json:"maxWorkersPerNamespace"`
	Alone     percentiles `json:"alone"`
	UnderLoad percentiles `json:"underLoad"`
	// P99Ratio is UnderLoad.P99 ÷ Alone.P99.
	P99Ratio float64 `json:"p99Ratio"`
	// HogAttempts counts tenant A's hook attempts seen while B was measured under load.
	HogAttempts int64 `json:"hogAttempts"`
}

// fairnessPhase measures B's pipelines applied one at a time, first alone, then while A
// has pipelines whose hook hangs (until the operator's hook call bound ends it, then again
// after its backoff) and pipelines whose hook is slow and fails, retried.
func (b *bench) fairnessPhase(ctx context.Context) error {
	spec := pipelineSpec{steps: b.cfg.k, pluginStep: -1}
	samples := max(b.cfg.latencySamples, 1)
	// Long enough for a pipeline stuck behind hanging calls, so that a broken share is
	// measured rather than cut short.
	const perPipeline = 2 * time.Minute
	r := &fairnessResult{Hanging: b.cfg.fairnessHang, Slow: b.cfg.fairnessSlow, Share: b.cfg.namespaceShare}
	b.res.Fairness = r

	alone, err := sequentialLatencies(ctx, b.client, b.tracker, namespace, names("fair-alone", 0, samples), spec, perPipeline)
	if err != nil {
		return fmt.Errorf("fairness, tenant B alone: %w", err)
	}
	r.Alone = percentilesOf(alone)

	if err := b.loadHog(ctx); err != nil {
		return err
	}
	before, err := b.hogAttempts(ctx)
	if err != nil {
		return err
	}
	loaded, err := sequentialLatencies(ctx, b.client, b.tracker, namespace, names("fair-load", 0, samples), spec, perPipeline)
	if err != nil {
		return fmt.Errorf("fairness, tenant B under tenant A's load: %w", err)
	}
	after, err := b.hogAttempts(ctx)
	if err != nil {
		return err
	}
	r.UnderLoad = percentilesOf(loaded)
	r.HogAttempts = after - before
	if r.Alone.P99 > 0 {
		r.P99Ratio = r.UnderLoad.P99 / r.Alone.P99
	}
	return nil
}

// loadHog creates tenant A's pipelines and waits until the operator works on them: every
// slow one has had an attempt, so the hanging ones hold their workers.
func (b *bench) loadHog(ctx context.Context) error {
	if _, err := b.cluster.Client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hogNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", hogNamespace, err)
	}
	retried := &v1alpha1.RetryPolicy{Limit: 100, Backoff: &v1alpha1.Backoff{
		Initial: &metav1.Duration{Duration: time.Second}, Max: &metav1.Duration{Duration: 5 * time.Second},
	}}
	hog := func(name string, with map[string]string) *v1alpha1.Pipeline {
		return &v1alpha1.Pipeline{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hogNamespace},
			Spec: v1alpha1.PipelineSpec{Steps: []v1alpha1.Step{{
				Name: "hog", Executor: "test.sleep", With: with, Retry: retried,
			}}},
		}
	}
	var pipelines []*v1alpha1.Pipeline
	for _, name := range names("hang", 0, b.cfg.fairnessHang) {
		pipelines = append(pipelines, hog(name, map[string]string{"duration": "1h"}))
	}
	for _, name := range names("slow", 0, b.cfg.fairnessSlow) {
		pipelines = append(pipelines, hog(name, map[string]string{"duration": "500ms", "fail": "retryable"}))
	}
	logf("Fairness: tenant A (%s): %d pipelines whose hook hangs, %d whose hook is slow (500 ms) and fails, retried",
		hogNamespace, b.cfg.fairnessHang, b.cfg.fairnessSlow)
	if err := b.createConcurrently(ctx, pipelines); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := b.client.StepwiseV1alpha1().Pipelines(hogNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, fmt.Errorf("list tenant A's pipelines: %w", err)
		}
		tried := 0
		for i := range list.Items {
			if s := list.Items[i].Status.Steps; len(s) > 0 && s[0].Attempts > 0 {
				tried++
			}
		}
		return tried >= b.cfg.fairnessSlow, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the operator to work on tenant A's pipelines: %w", err)
	}
	return nil
}

// createConcurrently creates the pipelines from the benchmark's creators.
func (b *bench) createConcurrently(ctx context.Context, pipelines []*v1alpha1.Pipeline) error {
	next := make(chan *v1alpha1.Pipeline)
	errs := make(chan error, b.cfg.creators)
	var wg sync.WaitGroup
	for range b.cfg.creators {
		wg.Go(func() {
			for p := range next {
				if _, err := b.client.StepwiseV1alpha1().Pipelines(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create pipeline %s/%s: %w", p.Namespace, p.Name, err)
					return
				}
			}
		})
	}
	var err error
feed:
	for _, p := range pipelines {
		select {
		case next <- p:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err != nil {
		return err
	}
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// hogAttempts sums the attempts of tenant A's steps.
func (b *bench) hogAttempts(ctx context.Context) (int64, error) {
	list, err := b.client.StepwiseV1alpha1().Pipelines(hogNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list tenant A's pipelines: %w", err)
	}
	var n int64
	for i := range list.Items {
		for _, s := range list.Items[i].Status.Steps {
			n += int64(s.Attempts)
		}
	}
	return n, nil
}
