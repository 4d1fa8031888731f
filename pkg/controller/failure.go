package controller

import (
	"context"
	"fmt"
	"time"

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

// failureTeardown is where the teardown after a failure under onFailure: Teardown is;
// empty when the pipeline is not handling one.
func (ps *pipelineSync) failureTeardown() v1alpha1.FailureTeardownPhase {
	if ps.status.Failure == nil {
		return ""
	}
	return ps.status.Failure.Teardown
}

// tearDownAfterFailure tears down the steps that ran, last first, once a step failed for
// good under onFailure Teardown, so that a failure does not leave a fleet worse off (the
// node is uncordoned, a trigger's budget slot is freed). It runs while the teardowns finish
// at once, as syncDeletion does, and returns when to look again.
func (ps *pipelineSync) tearDownAfterFailure(ctx context.Context) time.Duration {
	if ps.failureTeardown() == "" {
		i := ps.failedStep()
		if i < 0 || ps.onFailure() != v1alpha1.FailureTeardown {
			return 0
		}
		s := &ps.status.Steps[i]
		ps.status.Phase = v1alpha1.PipelineFailed
		ps.status.CurrentStep = s.Name
		ps.status.Failure = &v1alpha1.FailureRecord{
			Step: s.Name, Message: s.Message, Since: *ps.timeNow(), Teardown: v1alpha1.FailureTearingDown,
		}
		ps.setReady(metav1.ConditionFalse, v1alpha1.ReasonTearingDownAfterFailure, failedStepMessage(ps.status.Failure)+tearingDownSuffix)
		ps.warningEvent(v1alpha1.ReasonTearingDownAfterFailure, "Step %q failed; tearing down the steps that ran", s.Name)
	}
	requeue, _ := ps.tearDown(ctx, false, ps.now())
	return requeue
}

// summarizeFailureTeardown derives the status of a pipeline torn down after a failure, and
// reports whether it is one.
func (ps *pipelineSync) summarizeFailureTeardown() bool {
	f := ps.status.Failure
	if f == nil {
		return false
	}
	failure := failedStepMessage(f)
	if r, ok := ps.nextTeardown(false); ok {
		msg := failure + tearingDownSuffix
		if teardownBlocked(r.s) {
			msg = fmt.Sprintf("%s"+blockedInfix+"%s is blocked: %s (annotate %s to retry)",
				failure, r.s.Name, r.s.Message, v1alpha1.RetryAnnotation)
		}
		ps.setReady(metav1.ConditionFalse, v1alpha1.ReasonTearingDownAfterFailure, msg)
		return true
	}
	if f.Teardown != v1alpha1.FailureTornDown {
		ps.normalEvent(v1alpha1.ReasonTornDownAfterFailure, "The steps that ran were torn down after step %q failed", ps.status.CurrentStep)
		f.Teardown = v1alpha1.FailureTornDown
	}
	ps.setReady(metav1.ConditionFalse, v1alpha1.ReasonTornDownAfterFailure, failure+tornDownSuffix)
	return true
}

// failedStepMessage says which step failed, and how.
func failedStepMessage(f *v1alpha1.FailureRecord) string {
	return fmt.Sprintf("step %s failed: %s", f.Step, f.Message)
}

// Suffixes the failure teardown appends to the failure's message.
const (
	tearingDownSuffix = "; tearing down the steps that ran (onFailure: Teardown)"
	tornDownSuffix    = "; the steps that ran were torn down"
	blockedInfix      = "; the teardown of step "
)
