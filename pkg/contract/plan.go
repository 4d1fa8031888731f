package contract

import (
	"context"
	"strconv"
)

// Plan is what a step would do, found out without doing it: from the cluster (or the
// cloud) as it is now, acting as the step would, changing nothing.
type Plan struct {
	// Summary is one line: "cordon node worker-3", "evict 4 pods; 1 blocked".
	Summary string `json:"summary,omitempty"`
	// Details are the things the step would touch, one row each.
	Details []PlanItem `json:"details,omitempty"`
	// Warnings are what would block or fail the step (a PodDisruptionBudget that allows no
	// disruption, a right the ServiceAccount lacks).
	Warnings []string `json:"warnings,omitempty"`
	// Outputs are the outputs the step would produce, where it can know them, so that the
	// next steps' plans can resolve $(steps.STEP.outputs.KEY).
	Outputs map[string]string `json:"outputs,omitempty"`
}

// PlanItem is one thing a step would touch.
type PlanItem struct {
	// Kind of the thing: Node, Pod, Deployment, VirtualMachine...
	Kind string `json:"kind"`
	// Name of the thing, namespace/name for a namespaced object.
	Name string `json:"name"`
	// Action is what would be done to it: create, change, unchanged, evict, skip, delete,
	// wait, destroy...
	Action string `json:"action"`
	// Note says more: which fields change, which budget blocks it.
	Note string `json:"note,omitempty"`
}

// Bounds of a plan, as a step's status keeps it.
const (
	MaxPlanDetails  = 100
	MaxPlanWarnings = 20
	MaxPlanText     = 512
)

// NoPlan is the plan of an executor that cannot plan (it does not implement Planner, or
// its plugin speaks an older protocol): it would run, and says nothing more.
func NoPlan() Plan { return Plan{Summary: "would run; the executor gives no details"} }

// Planner is what an executor implements, for a request of type R, to tell what its
// creation hooks would do without doing it. Optional: an executor without it plans as
// NoPlan.
type Planner[R any] interface {
	Plan(ctx context.Context, req R) (Plan, error)
}

// Bounded returns p cut to the bounds a status keeps: text to MaxPlanText bytes, at most
// MaxPlanDetails rows and MaxPlanWarnings warnings, the rest counted in a last one.
func (p Plan) Bounded() Plan {
	p.Summary = Truncate(p.Summary, MaxPlanText)
	if n := len(p.Details); n > MaxPlanDetails {
		p.Details = append(p.Details[:MaxPlanDetails:MaxPlanDetails], PlanItem{Kind: "…", Name: "…", Action: "…",
			Note: Truncate(strconv.Itoa(n-MaxPlanDetails)+" more rows not shown", MaxPlanText)})
	}
	details := make([]PlanItem, len(p.Details))
	for i, d := range p.Details {
		details[i] = PlanItem{Kind: Truncate(d.Kind, 63), Name: Truncate(d.Name, MaxPlanText), Action: Truncate(d.Action, 63),
			Note: Truncate(d.Note, MaxPlanText)}
	}
	p.Details = details
	if n := len(p.Warnings); n > MaxPlanWarnings {
		p.Warnings = append(p.Warnings[:MaxPlanWarnings-1:MaxPlanWarnings-1], strconv.Itoa(n-MaxPlanWarnings+1)+" more warnings not shown")
	}
	warnings := make([]string, len(p.Warnings))
	for i, w := range p.Warnings {
		warnings[i] = Truncate(w, MaxPlanText)
	}
	p.Warnings = warnings
	if len(p.Details) == 0 {
		p.Details = nil
	}
	if len(p.Warnings) == 0 {
		p.Warnings = nil
	}
	return p
}
