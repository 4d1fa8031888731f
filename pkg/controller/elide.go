package controller

import (
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// maxCachedValueBytes is how many bytes of values a pipeline keeps in the cache: the keys and
// values of its params, its steps' with, its template copy's, and its steps' outputs,
// hook state, created records, run records and plans. These are what a tenant can make as
// large as the API server allows (about 1.5 MiB an object), and the cache holds every
// pipeline of the cluster, on both replicas. Above it the cache keeps none of
// them (elideValues), and the engine fetches the pipeline when it acts on it (fetchWhole):
// the operator's memory then follows the number of pipelines, not the bytes written into
// them. A pipeline of a few short parameters is well under it and costs no fetch.
const maxCachedValueBytes = 4 << 10

// elideValues leaves a pipeline's values out of its cached copy when they are more than
// maxCachedValueBytes, and records in p.Elided what the engine decides from without them.
// Everything else (names, executors, phases, conditions, times) stays.
func elideValues(p *v1alpha1.Pipeline) {
	if p.Elided != nil || valueBytes(p) <= maxCachedValueBytes {
		return
	}
	p.Elided = &v1alpha1.ElidedValues{SpecHash: specHash(&p.Spec), ParamsDigest: v1alpha1.ParamsDigest(p.Spec.Params)}
	p.Spec.Params = nil
	elideStepValues(p.Spec.Steps)
	if t := p.Status.Template; t != nil {
		t.Params = nil
		elideStepValues(t.Steps)
	}
	for _, steps := range [][]v1alpha1.StepStatus{p.Status.Steps, p.Status.RetiredSteps} {
		for i := range steps {
			s := &steps[i]
			s.Outputs, s.HookState, s.Created, s.Plan = nil, nil, nil, nil
			if s.Ran != nil {
				s.Ran.Params = nil
			}
		}
	}
}

func elideStepValues(steps []v1alpha1.Step) {
	for i := range steps {
		steps[i].With = nil
	}
}

// valueBytes counts the bytes elideValues would leave out.
func valueBytes(p *v1alpha1.Pipeline) int {
	n := mapBytes(p.Spec.Params)
	for i := range p.Spec.Steps {
		n += mapBytes(p.Spec.Steps[i].With)
	}
	if t := p.Status.Template; t != nil {
		n += mapBytes(t.Params)
		for i := range t.Steps {
			n += mapBytes(t.Steps[i].With)
		}
	}
	for _, steps := range [][]v1alpha1.StepStatus{p.Status.Steps, p.Status.RetiredSteps} {
		for i := range steps {
			s := &steps[i]
			n += mapBytes(s.Outputs) + mapBytes(s.HookState) + mapBytes(s.Created) + planBytes(s.Plan)
			if s.Ran != nil {
				n += mapBytes(s.Ran.Params)
			}
		}
	}
	return n
}

func mapBytes(m map[string]string) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
	}
	return n
}

func planBytes(plan *v1alpha1.StepPlan) int {
	if plan == nil {
		return 0
	}
	n := len(plan.Summary)
	for _, d := range plan.Details {
		n += len(d.Kind) + len(d.Name) + len(d.Action) + len(d.Note)
	}
	for _, w := range plan.Warnings {
		n += len(w)
	}
	return n
}
