package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

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
// node is uncordoned, a trigger's budget slot is freed). It records the failure when the
// teardown starts, runs while the teardowns finish at once, as syncDeletion does, records
// when it is done, and returns when to look again.
func (ps *pipelineSync) tearDownAfterFailure(ctx context.Context) time.Duration {
	if ps.status.Failure == nil {
		s := &ps.status.Steps[ps.failedStep()]
		ps.status.Failure = &v1alpha1.FailureRecord{
			Step: s.Name, Message: s.Message, Since: *ps.timeNow(), Teardown: v1alpha1.FailureTearingDown,
		}
		ps.record(failureTeardownStarted(s))
	}
	requeue, _ := ps.tearDown(ctx, false, ps.now())
	if _, left := ps.nextTeardown(false); !left {
		ps.status.Failure.Teardown = v1alpha1.FailureTornDown
		ps.record(failureTeardownDone(ps.status.Failure))
	}
	return requeue
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
