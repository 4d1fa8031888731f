package controller

import (
	"encoding/json"
	"hash/fnv"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// pipelineSync is the work of one sync on one pipeline: a working copy of its status and the
// Events to record once that status is written.
type pipelineSync struct {
	c      *Controller
	p      *v1alpha1.Pipeline // from the cache: never modified
	status *v1alpha1.PipelineStatus
	events []event
	// started indexes, by step name, the StepStarted events of this sync in events: a step
	// that starts and succeeds in the same sync gets only its StepSucceeded event, which
	// keeps Events (writes too) down to one a step for instant steps.
	started map[string]int
}

func (c *Controller) newPipelineSync(p *v1alpha1.Pipeline) *pipelineSync {
	ps := &pipelineSync{c: c, p: p, status: p.Status.DeepCopy()}
	ps.alignSteps()
	return ps
}

func (ps *pipelineSync) now() time.Time { return ps.c.clock.Now() }

func (ps *pipelineSync) timeNow() *metav1.Time {
	t := metav1.NewTime(ps.now())
	return &t
}

// alignSteps gives the status one entry for each step of the spec, in spec order, keeping
// what is known of steps that stay. A step removed from the spec is forgotten: without
// its spec, its teardown could not run.
func (ps *pipelineSync) alignSteps() {
	known := make(map[string]v1alpha1.StepStatus, len(ps.status.Steps))
	for _, s := range ps.status.Steps {
		known[s.Name] = s
	}
	aligned := make([]v1alpha1.StepStatus, len(ps.p.Spec.Steps))
	for i, step := range ps.p.Spec.Steps {
		s, ok := known[step.Name]
		if !ok {
			s = v1alpha1.StepStatus{Name: step.Name, Phase: v1alpha1.StepPending}
		}
		s.Executor = step.Executor
		aligned[i] = s
	}
	ps.status.Steps = aligned
}

// specHash identifies what the steps run with: the spec without suspend.
func specHash(spec *v1alpha1.PipelineSpec) string {
	unsuspended := *spec
	unsuspended.Suspend = false
	data, err := json.Marshal(&unsuspended) // maps marshal with sorted keys: the hash is stable
	if err != nil {
		return "" // cannot happen for these types; an empty hash only re-runs the steps
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	return strconv.FormatUint(h.Sum64(), 16)
}

// resetStep makes a step run again from its first hook. What tells that it started before
// (its start time) stays, so that its teardown still runs if the pipeline is deleted.
func (ps *pipelineSync) resetStep(s *v1alpha1.StepStatus) {
	if s.Phase == v1alpha1.StepPending {
		return
	}
	s.Phase = v1alpha1.StepPending
	s.Hook = ""
	s.Attempts = 0
	s.HookStartTime = nil
	s.NextAttemptTime = nil
	s.CompletionTime = nil
}

// currentStep is the index of the first step that has not succeeded, or -1.
func (ps *pipelineSync) currentStep() int {
	for i := range ps.status.Steps {
		if ps.status.Steps[i].Phase != v1alpha1.StepSucceeded {
			return i
		}
	}
	return -1
}

// failedStep is the index of a step whose create hooks failed, or -1.
func (ps *pipelineSync) failedStep() int {
	for i := range ps.status.Steps {
		s := &ps.status.Steps[i]
		if s.Phase == v1alpha1.StepFailed && !isDeleteHook(s.Hook) {
			return i
		}
	}
	return -1
}

func (ps *pipelineSync) failed() bool { return ps.failedStep() >= 0 }

// lastStepToTearDown is the index of the last step that started and is not torn down.
func (ps *pipelineSync) lastStepToTearDown() int {
	for i := len(ps.status.Steps) - 1; i >= 0; i-- {
		s := &ps.status.Steps[i]
		if s.StartTime != nil && s.Phase != v1alpha1.StepDeleted {
			return i
		}
	}
	return -1
}

// teardownBlocked tells whether step i's teardown failed for good and waits for a retry.
func (ps *pipelineSync) teardownBlocked(i int) bool {
	s := &ps.status.Steps[i]
	return s.Phase == v1alpha1.StepFailed && isDeleteHook(s.Hook)
}
