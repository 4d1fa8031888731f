package rules

import (
	"time"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// DefaultFailureBudget is the failure budget of a trigger whose spec.failureBudget is
// unset (the schema's default), or below it (stored before the field existed): stop at
// the first failure.
const DefaultFailureBudget = 1

// FailureBudget is how many of the trigger's pipelines may fail since it was created or
// last resumed before it starts nothing new.
func FailureBudget(trig *v1alpha1.PipelineTrigger) int32 {
	return max(trig.Spec.FailureBudget, DefaultFailureBudget)
}

// ResumeOf is the ID of the trigger's last resume, "" when it was never resumed.
func ResumeOf(trig *v1alpha1.PipelineTrigger) string {
	if trig.Spec.Resume == nil {
		return ""
	}
	return trig.Spec.Resume.ID
}

// CountsAgainstBudget tells whether a pipeline of the trigger that failed counts against
// its failure budget: it started since the trigger's last resume (AnnotationResume).
func CountsAgainstBudget(trig *v1alpha1.PipelineTrigger, p *v1alpha1.Pipeline) bool {
	return p.Status.Phase == v1alpha1.PipelineFailed && p.Annotations[v1alpha1.AnnotationResume] == ResumeOf(trig)
}

// FailedAt is when a failed pipeline failed: when its failure teardown started, else when
// its failed step ended, else when it was created (a status without either).
func FailedAt(p *v1alpha1.Pipeline) time.Time {
	if f := p.Status.Failure; f != nil {
		return f.Since.Time
	}
	var at time.Time
	for _, s := range p.Status.Steps {
		if s.Phase == v1alpha1.StepFailed && s.CompletionTime != nil && s.CompletionTime.After(at) {
			at = s.CompletionTime.Time
		}
	}
	if at.IsZero() {
		return p.CreationTimestamp.Time
	}
	return at
}
