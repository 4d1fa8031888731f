package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// onFailure is the pipeline's failure policy: its own, else its template's, else Stop.
func (ps *pipelineSync) onFailure() v1alpha1.FailurePolicy {
	if ps.p.Spec.OnFailure != "" {
		return ps.p.Spec.OnFailure
	}
	if t := ps.status.Template; t != nil && t.OnFailure != "" {
		return t.OnFailure
	}
	return v1alpha1.FailureStop
}

// failureTeardownReason is the Ready reason of a pipeline torn down, or being torn down,
// after a step failed for good under onFailure Teardown; empty otherwise.
func (ps *pipelineSync) failureTeardownReason() string {
	ready := meta.FindStatusCondition(ps.status.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ps.status.Phase != v1alpha1.PipelineFailed {
		return ""
	}
	switch ready.Reason {
	case v1alpha1.ReasonTearingDownAfterFailure, v1alpha1.ReasonTornDownAfterFailure:
		return ready.Reason
	}
	return ""
}

// tearDownAfterFailure tears down the steps that ran, last first, once a step failed for
// good under onFailure Teardown, so that a failure does not leave a fleet worse off (the
// node is uncordoned, a trigger's budget slot is freed). It runs while the teardowns finish
// at once, as syncDeletion does, and returns when to look again.
func (ps *pipelineSync) tearDownAfterFailure(ctx context.Context) time.Duration {
	if ps.failureTeardownReason() == "" {
		i := ps.failedStep()
		if i < 0 || ps.onFailure() != v1alpha1.FailureTeardown {
			return 0
		}
		s := &ps.status.Steps[i]
		ps.status.Phase = v1alpha1.PipelineFailed
		ps.status.CurrentStep = s.Name
		ps.setReady(metav1.ConditionFalse, v1alpha1.ReasonTearingDownAfterFailure, fmt.Sprintf(
			"step %s failed: %s"+tearingDownSuffix, s.Name, s.Message))
		ps.warningEvent(v1alpha1.ReasonTearingDownAfterFailure, "Step %q failed; tearing down the steps that ran", s.Name)
	}
	requeue, _ := ps.tearDown(ctx, false, ps.now())
	return requeue
}

// summarizeFailureTeardown derives the status of a pipeline torn down after a failure, and
// reports whether it is one.
func (ps *pipelineSync) summarizeFailureTeardown() bool {
	if ps.failureTeardownReason() == "" {
		return false
	}
	ready := meta.FindStatusCondition(ps.status.Conditions, v1alpha1.ConditionReady)
	failure := ready.Message
	if r, ok := ps.nextTeardown(false); ok {
		if teardownBlocked(r.s) {
			failure = fmt.Sprintf("%s"+blockedInfix+"%s is blocked: %s (annotate %s to retry)",
				cut(failure), r.s.Name, r.s.Message, v1alpha1.RetryAnnotation)
		}
		ps.setReady(metav1.ConditionFalse, v1alpha1.ReasonTearingDownAfterFailure, failure)
		return true
	}
	if ready.Reason != v1alpha1.ReasonTornDownAfterFailure {
		ps.normalEvent(v1alpha1.ReasonTornDownAfterFailure, "The steps that ran were torn down after step %q failed", ps.status.CurrentStep)
	}
	ps.setReady(metav1.ConditionFalse, v1alpha1.ReasonTornDownAfterFailure, cut(failure)+tornDownSuffix)
	return true
}

// Suffixes the failure teardown appends to the failure's message.
const (
	tearingDownSuffix = "; tearing down the steps that ran (onFailure: Teardown)"
	tornDownSuffix    = "; the steps that ran were torn down"
	blockedInfix      = "; the teardown of step "
)

// cut keeps a failure message's first part, before what the teardown appended.
func cut(msg string) string {
	for _, suffix := range []string{tearingDownSuffix, tornDownSuffix} {
		if before, ok := strings.CutSuffix(msg, suffix); ok {
			return before
		}
	}
	if i := strings.Index(msg, blockedInfix); i >= 0 {
		return msg[:i]
	}
	return msg
}
