package cli

import (
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops"
)

// The documents of plan -o json and -o yaml.

// planReport is a dry run's plan for -o json and -o yaml.
type planReport struct {
	// DryRun names the dry-run Pipeline that made the plan; it is deleted unless Kept.
	DryRun    string                 `json:"dryRun"`
	Namespace string                 `json:"namespace"`
	Kept      bool                   `json:"kept"`
	Phase     v1alpha1.PipelinePhase `json:"phase"`
	// Reason and Message are the pipeline's Ready condition's.
	Reason  string       `json:"reason,omitempty"`
	Message string       `json:"message,omitempty"`
	Steps   []stepReport `json:"steps"`
}

// stepReport is one step's part of a planReport.
type stepReport struct {
	Name     string             `json:"name"`
	Executor string             `json:"executor,omitempty"`
	Phase    v1alpha1.StepPhase `json:"phase,omitempty"`
	Plan     *v1alpha1.StepPlan `json:"plan,omitempty"`
	// Outputs are what the step would output, for the steps after it.
	Outputs map[string]string `json:"outputs,omitempty"`
	Message string            `json:"message,omitempty"`
}

func reportOf(p *v1alpha1.Pipeline, kept bool) planReport {
	r := planReport{DryRun: p.Name, Namespace: p.Namespace, Kept: kept, Phase: p.Status.Phase, Steps: []stepReport{}}
	if ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); ready != nil {
		r.Reason, r.Message = ready.Reason, ready.Message
	}
	for _, s := range pipelineops.PlannedSteps(p) {
		sr := stepReport{Name: s.Name, Executor: s.Executor}
		if st := s.Status; st != nil {
			sr.Phase, sr.Plan, sr.Outputs, sr.Message = st.Phase, st.Plan, st.Outputs, st.Message
		}
		r.Steps = append(r.Steps, sr)
	}
	return r
}

// triggerReport is plan --trigger's -o json and -o yaml.
type triggerReport struct {
	Trigger     string `json:"trigger"`
	Template    string `json:"template"`
	Concurrency int    `json:"concurrency"`
	// Unfinished counts the trigger's pipelines that hold a place; StartNow how many of the
	// waiting objects would start now; Blocked says why none would.
	Unfinished int    `json:"unfinished"`
	StartNow   int    `json:"startNow"`
	Blocked    string `json:"blocked,omitempty"`
	// Started are the matching objects that have a pipeline already.
	Started []string `json:"started,omitempty"`
	// Objects are the planned objects, in the order they would start; NotPlanned the other
	// waiting ones, beyond --max.
	Objects    []objectReport `json:"objects"`
	NotPlanned []string       `json:"notPlanned,omitempty"`
	// Unresolved are the objects whose params do not resolve: they wait without a place.
	Unresolved []unresolvedObject `json:"unresolved,omitempty"`
}

// objectReport is one planned object.
type objectReport struct {
	Object    string            `json:"object"`
	StartsNow bool              `json:"startsNow"`
	Params    map[string]string `json:"params,omitempty"`
	Plan      planReport        `json:"plan"`
}

// unresolvedObject is an object whose params do not resolve, and why.
type unresolvedObject struct {
	Object string `json:"object"`
	Error  string `json:"error"`
}

func triggerReportOf(q *triggerQueue, planned []waitingObject, results []*v1alpha1.Pipeline, kept bool) triggerReport {
	startable := q.startable()
	free := min(q.free(), len(startable))
	r := triggerReport{
		Trigger: q.trig.Namespace + "/" + q.trig.Name, Template: q.trig.Spec.TemplateRef.Name,
		Concurrency: q.concurrency(), Unfinished: q.unfinished, StartNow: free, Blocked: q.blocked,
		Started: q.started, Objects: []objectReport{},
	}
	for i, w := range planned {
		r.Objects = append(r.Objects, objectReport{Object: w.name, StartsNow: i < free, Params: w.params, Plan: reportOf(results[i], kept)})
	}
	for _, w := range startable[len(planned):] {
		r.NotPlanned = append(r.NotPlanned, w.name)
	}
	for _, w := range q.waiting {
		if w.err != nil {
			r.Unresolved = append(r.Unresolved, unresolvedObject{Object: w.name, Error: w.err.Error()})
		}
	}
	return r
}
