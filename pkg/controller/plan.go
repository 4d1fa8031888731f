package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// maxPlanDuration bounds how long one step's plan may take: a plan reads, it never waits
// for anything to happen.
const maxPlanDuration = time.Minute

// syncPlan plans a dry-run pipeline (spec.dryRun): for every step in order it asks the
// executor what it would do, with a request built as for Create (parameters resolved and
// checked, Secrets read as the ServiceAccount, the planned outputs of the earlier steps),
// and writes the plan into the step's status; the pipeline ends Planned, or Failed at the
// first step that cannot be planned, as a run would fail. It runs no hook, records no run
// and puts no finalizer: deleting a dry run tears nothing down. A plan is made once per
// generation.
func (c *Controller) syncPlan(ctx context.Context, p *v1alpha1.Pipeline) (time.Duration, error) {
	if p.DeletionTimestamp != nil {
		if slices.Contains(p.Finalizers, v1alpha1.Finalizer) { // an object admitted before dryRun was known
			return 0, c.removeFinalizer(ctx, p)
		}
		return 0, nil
	}
	done := p.Status.Phase == v1alpha1.PipelinePlanned || p.Status.Phase == v1alpha1.PipelineFailed
	if done && p.Status.ObservedGeneration == p.Generation {
		return 0, nil
	}
	ps := c.newPipelineSync(p)
	ps.status.ObservedGeneration = p.Generation
	target, err := c.planTarget(ctx, p)
	if err != nil {
		return 0, err
	}
	ps.planTarget = target
	if p.Spec.TemplateRef != nil && !ps.takeTemplate(true) {
		return 0, c.finish(ctx, ps)
	}
	planned := true
	for i := range ps.status.Steps {
		if planned = ps.planStep(ctx, ps.specStep(i)); !planned {
			break
		}
	}
	if planned {
		ps.record(dryRunPlanned(len(ps.status.Steps), ps.planWarnings()))
	}
	return 0, c.finish(ctx, ps)
}

// planStep plans step r and tells whether the next step may be planned.
func (ps *pipelineSync) planStep(ctx context.Context, r stepRef) bool {
	s := r.s
	s.Phase, s.Plan, s.Outputs, s.Message, s.StartTime = v1alpha1.StepRunning, nil, nil, "", ps.timeNow()
	exec, ok := ps.env.executors.Get(r.step.Executor)
	if !ok {
		return ps.failPlan(s, contract.Permanent(contract.ReasonUnknownExecutor, ps.env.executors.Missing(r.step.Executor)))
	}
	req, err := ps.request(ctx, r, exec, createDirection)
	if err != nil {
		return ps.failPlan(s, err)
	}
	req.Pipeline = ps.planAs()
	deadline := ps.now().Add(min(r.step.EffectiveTimeout(), maxPlanDuration))
	plan, err := guarded(ctx, exec, deadline, 0, func(ctx context.Context) (contract.Plan, error) {
		return executor.Plan(ctx, exec, req)
	})
	redact := req.Redactor()
	if err != nil {
		return ps.failPlan(s, redact.Error(err))
	}
	if policy := r.step.Approval; policy != nil {
		// First of all, a run would wait for people.
		plan.Details = append([]contract.PlanItem{{Kind: "Approval", Name: s.Name, Action: "wait",
			Note: fmt.Sprintf("%d approval(s) by %s before the step runs", policy.EffectiveApprovals(), approvers(policy))}}, plan.Details...)
	}
	plan = redact.Plan(plan).Bounded()
	if err := mergeOutputs(s, plan.Outputs); err != nil {
		return ps.failPlan(s, err)
	}
	s.Phase, s.Plan, s.CompletionTime = v1alpha1.StepPlanned, stepPlan(plan), ps.timeNow()
	s.Message = contract.Truncate(plan.Summary, v1alpha1.MaxStepMessageLength)
	return true
}

// planTarget is the pipeline PlanAsAnnotation names, when it exists: from the cache, else
// (it rests, and the cache holds no resting pipeline) read from the API server; nil when
// the dry run plans for itself or the pipeline it names does not exist.
func (c *Controller) planTarget(ctx context.Context, p *v1alpha1.Pipeline) (*v1alpha1.Pipeline, error) {
	name := p.Annotations[v1alpha1.PlanAsAnnotation]
	if name == "" || name == p.Name {
		return nil, nil
	}
	if obj, exists, err := c.pipelines.GetByKey(p.Namespace + "/" + name); err == nil && exists {
		if other, ok := obj.(*v1alpha1.Pipeline); ok {
			return other, nil
		}
	}
	other, err := c.client.StepwiseV1alpha1().Pipelines(p.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pipeline %s/%s, which dry run %s plans for: %w", p.Namespace, name, p.Name, err)
	}
	return other, nil
}

// planAs is the pipeline the dry run plans for: the one PlanAsAnnotation names, with its
// UID when it exists (planTarget), or the dry run itself.
func (ps *pipelineSync) planAs() contract.PipelineRef {
	ref := contract.PipelineRef{Namespace: ps.p.Namespace, Name: ps.p.Name, UID: string(ps.p.UID), Generation: ps.p.Generation}
	name := ps.p.Annotations[v1alpha1.PlanAsAnnotation]
	if name == "" || name == ps.p.Name {
		return ref
	}
	// Not there yet: the objects it would own do not exist either, so the dry run's own UID
	// plans the same.
	ref.Name = name
	if other := ps.planTarget; other != nil {
		ref.UID, ref.Generation = string(other.UID), other.Generation
	}
	return ref
}

// failPlan records that step s cannot be planned, as a run would fail it.
func (ps *pipelineSync) failPlan(s *v1alpha1.StepStatus, err error) bool {
	s.Phase, s.CompletionTime = v1alpha1.StepFailed, ps.timeNow()
	s.Message = contract.Truncate(err.Error(), v1alpha1.MaxStepMessageLength)
	s.Reason = executor.ReasonFor(err)
	ps.record(planFailed(s))
	return false
}

// planWarnings counts the warnings of the steps' plans.
func (ps *pipelineSync) planWarnings() int {
	warnings := 0
	for _, s := range ps.status.Steps {
		if s.Plan != nil {
			warnings += len(s.Plan.Warnings)
		}
	}
	return warnings
}

// stepPlan is the status's form of a plan.
func stepPlan(p contract.Plan) *v1alpha1.StepPlan {
	out := &v1alpha1.StepPlan{Summary: p.Summary, Warnings: p.Warnings}
	for _, d := range p.Details {
		out.Details = append(out.Details, v1alpha1.PlanItem{Kind: d.Kind, Name: d.Name, Action: d.Action, Note: d.Note})
	}
	return out
}
