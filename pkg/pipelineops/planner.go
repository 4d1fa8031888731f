package pipelineops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
)

// deleteTimeout bounds the deletion of the dry-run pipelines, which runs even once the
// caller's context has ended (Ctrl-C, a timeout): they are to be left behind only when
// kept.
const deleteTimeout = 30 * time.Second

// Planner plans pipelines in one namespace with the caller's credentials: it creates
// dry-run pipelines (DryRunOf), waits until the operator has planned each, and deletes
// them. Errors quote the cluster's text as it is: escape it before printing it.
type Planner struct {
	client clientset.Interface
	ns     string
	// created are the dry-run pipelines made so far, for Delete.
	created []*v1alpha1.Pipeline
}

// NewPlanner returns a Planner of namespace ns.
func NewPlanner(client clientset.Interface, ns string) *Planner {
	return &Planner{client: client, ns: ns}
}

// Created are the dry-run pipelines Plan created, as the API server returned them, also
// when it failed.
func (pl *Planner) Created() []*v1alpha1.Pipeline { return slices.Clone(pl.created) }

// Plan creates the dry-run pipelines and returns them, in order, once each is Planned or
// Failed, within timeout. Whatever it created is for Delete, also when it fails.
func (pl *Planner) Plan(ctx context.Context, pipelines []*v1alpha1.Pipeline, timeout time.Duration) ([]*v1alpha1.Pipeline, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := pl.client.StepwiseV1alpha1().Pipelines(pl.ns)
	for _, p := range pipelines {
		p = p.DeepCopy()
		p.Namespace = pl.ns
		// Strict: an API server whose CRD predates spec.dryRun refuses it rather than drop
		// it, which would run the pipeline for real.
		created, err := client.Create(ctx, p, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
		if err != nil {
			return nil, fmt.Errorf("create a dry-run pipeline in %s: %w", pl.ns, err)
		}
		pl.created = append(pl.created, created)
		if !created.Spec.DryRun {
			return nil, fmt.Errorf("the API server dropped spec.dryRun of pipeline %s/%s: its Pipeline CRD predates dry runs (upgrade Stepwise)", pl.ns, created.Name)
		}
	}
	results, err := pl.wait(ctx)
	if err != nil && ctx.Err() != nil {
		// The watch ends with "timed out waiting for the condition" either way; say which
		// pipeline is not planned yet, and why the wait ended.
		for _, p := range results {
			if planDone(p) {
				continue
			}
			phase := p.Status.Phase
			if phase == "" {
				phase = v1alpha1.PipelinePending
			}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("no plan after %s: dry-run pipeline %s/%s is still %s (is the operator running, and recent enough to plan?)",
					timeout, pl.ns, p.Name, phase)
			}
			return nil, fmt.Errorf("interrupted while dry-run pipeline %s/%s is %s: %w", pl.ns, p.Name, phase, ctx.Err())
		}
	}
	if err != nil {
		return nil, err
	}
	return results, nil
}

// wait follows the created pipelines with an informer (it re-lists after errors) until each
// is Planned or Failed, and returns them as last seen, in order.
func (pl *Planner) wait(ctx context.Context) ([]*v1alpha1.Pipeline, error) {
	lw := PipelineListWatch(pl.client, pl.ns, func(opts *metav1.ListOptions) { opts.LabelSelector = PlanLabel + "=true" })
	last := slices.Clone(pl.created)
	index := make(map[string]int, len(last))
	for i, p := range last {
		index[p.Name] = i
	}
	gone := func(name string) error {
		return fmt.Errorf("dry-run pipeline %s/%s was deleted before it was planned", pl.ns, name)
	}
	exists := func(store cache.Store) (bool, error) {
		for _, p := range pl.created {
			_, ok, err := store.GetByKey(pl.ns + "/" + p.Name)
			if err != nil {
				return false, fmt.Errorf("look up dry-run pipeline %s/%s: %w", pl.ns, p.Name, err)
			}
			if !ok {
				return false, gone(p.Name)
			}
		}
		return false, nil
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &v1alpha1.Pipeline{}, exists, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*v1alpha1.Pipeline)
		if !ok {
			return false, nil
		}
		i, mine := index[p.Name]
		if !mine { // someone else's plan
			return false, nil
		}
		if ev.Type == watch.Deleted {
			return false, gone(p.Name)
		}
		last[i] = p
		if err := planProblem(p); err != nil {
			return false, err
		}
		return !slices.ContainsFunc(last, func(p *v1alpha1.Pipeline) bool { return !planDone(p) }), nil
	})
	return last, err
}

// Delete deletes the dry-run pipelines Plan created, those already gone aside; deleting one
// tears nothing down. It runs after ctx ended too, within a bound of its own. The error
// joins one error for each pipeline it could not delete.
func (pl *Planner) Delete(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
	defer cancel()
	client := pl.client.StepwiseV1alpha1().Pipelines(pl.ns)
	var errs []error
	for _, p := range pl.created {
		opts := metav1.DeleteOptions{}
		if p.UID != "" {
			// Not another pipeline that took the name since.
			opts.Preconditions = &metav1.Preconditions{UID: &p.UID}
		}
		if err := client.Delete(ctx, p.Name, opts); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete dry-run pipeline %s/%s: %w", pl.ns, p.Name, err))
		}
	}
	return errors.Join(errs...)
}
