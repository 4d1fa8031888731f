package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// etcdRequestLimit is etcd's default --max-request-bytes, which the fake API server below
// enforces as the real one does through etcd.
const etcdRequestLimit = 1536 << 10

// errEtcdTooLarge is how the API server answers a write etcd refuses for its size.
var errEtcdTooLarge = apierrors.NewInternalError(errors.New("etcdserver: request is too large"))

// refuseStatusWrites makes the fake API refuse, with err, the status writes refused says
// are too large.
func refuseStatusWrites(f *fixture, refused func(p *v1alpha1.Pipeline) bool, err error) {
	f.client.PrependReactor("update", "pipelines", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" {
			return false, nil, nil
		}
		if refused(action.(clienttesting.UpdateAction).GetObject().(*v1alpha1.Pipeline)) {
			return true, nil, err
		}
		return false, nil, nil
	})
}

func anyOutputs(p *v1alpha1.Pipeline) bool {
	for _, s := range p.Status.Steps {
		if len(s.Outputs) > 0 {
			return true
		}
	}
	return false
}

func anyHookState(p *v1alpha1.Pipeline) bool {
	for _, s := range append(p.Status.Steps, p.Status.RetiredSteps...) {
		if len(s.HookState) > 0 {
			return true
		}
	}
	return false
}

func overEtcdLimit(p *v1alpha1.Pipeline) bool {
	data, err := json.Marshal(p)
	return err != nil || len(data) > etcdRequestLimit
}

func objectBytes(t *testing.T, p *v1alpha1.Pipeline) int {
	t.Helper()
	data, err := json.Marshal(p)
	require.NoError(t, err)
	return len(data)
}

// TestStatusTooLargeIsFinalForTheHook: a status write refused for its size (the API
// server's 413, or etcd's "request is too large" as a 500) was returned as an error, so
// the sync ran the same hooks again at every retry without ever counting an attempt. The
// steps the sync changed fail instead, carrying nothing of what was refused.
func TestStatusTooLargeIsFinalForTheHook(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{name: "API server 413", err: apierrors.NewRequestEntityTooLargeError("limit is 3145728")},
		{name: "etcd request limit", err: errEtcdTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, newPipeline(stepsOf("only", "next")...))
			refuseStatusWrites(f, anyOutputs, tt.err)
			f.exec.on("only", v1alpha1.HookCreate, func(context.Context, *executor.Request) (contract.Result, error) {
				return contract.DoneWithOutputs("", map[string]string{"blob": "SECRET-ISH-VALUE"}), nil
			})
			syncIgnoringErrors(f, 10)

			p := f.get("p")
			s := stepStatus(p, "only")
			assert.Equal(t, 1, countCalls(f, "only/Create"), "the hook ran once")
			assert.Equal(t, v1alpha1.StepFailed, s.Phase)
			assert.Equal(t, v1alpha1.ReasonStatusTooLarge, readyCondition(s.Conditions).Reason)
			assert.Contains(t, s.Message, "too large")
			assert.Contains(t, s.Message, v1alpha1.RetryAnnotation, "the way out")
			assert.NotContains(t, s.Message, "SECRET-ISH-VALUE")
			assert.Empty(t, s.Outputs, "what was refused is not written again")
			assert.NotNil(t, s.Ran, "the run record stays: the step is torn down from it")
			assert.Equal(t, v1alpha1.PipelineFailed, p.Status.Phase)
			assert.Contains(t, f.events(), "Warning "+v1alpha1.ReasonStatusTooLarge)
		})
	}
}

// TestStatusTooLargeIsFinalForARetiredTeardown: the same holds for the teardown of a step
// the spec no longer has: the retired run's teardown is blocked, not run again.
func TestStatusTooLargeIsFinalForARetiredTeardown(t *testing.T) {
	f := ranRetirement(t, v1alpha1.UpdateRerun)
	f.exec.reset()
	refuseStatusWrites(f, anyHookState, errEtcdTooLarge)
	f.exec.on("terminate", v1alpha1.HookDelete, func(context.Context, *executor.Request) (contract.Result, error) {
		return contract.Wait(time.Second, "").WithState(map[string]string{"op": "op-1"}), nil
	})

	f.update("p", func(p *v1alpha1.Pipeline) {
		p.Generation = 2
		p.Spec.Steps = p.Spec.Steps[:1]
	})
	syncIgnoringErrors(f, 10)

	p := f.get("p")
	require.Len(t, p.Status.RetiredSteps, 1)
	retired := p.Status.RetiredSteps[0]
	assert.Equal(t, 1, countCalls(f, "terminate/Delete"), "the hook ran once")
	assert.Equal(t, v1alpha1.StepFailed, retired.Phase)
	assert.Equal(t, v1alpha1.ReasonStatusTooLarge, readyCondition(retired.Conditions).Reason)
	assert.Empty(t, retired.HookState)
	assert.NotNil(t, retired.Ran)
	assert.Equal(t, v1alpha1.ReasonTeardownFailed, readyCondition(p.Status.Conditions).Reason)
}

// TestDryRunOverTheBudgetIsWritten: a plan of 50 steps of 100 rows each is larger than
// etcd takes; the rows are left out, the summaries kept, and the plan is written.
func TestDryRunOverTheBudgetIsWritten(t *testing.T) {
	steps := make([]v1alpha1.Step, v1alpha1.MaxSteps)
	for i := range steps {
		steps[i] = v1alpha1.Step{Name: fmt.Sprintf("s%d", i), Executor: "test.plan"}
	}
	f := newFixture(t, dryRun(steps...))
	refuseStatusWrites(f, overEtcdLimit, errEtcdTooLarge)
	note := strings.Repeat("n", contract.MaxPlanText)
	f.withPlanner(func(req *executor.Request) (contract.Plan, error) {
		plan := contract.Plan{Summary: "plan of " + req.Step, Warnings: []string{"careful"}}
		for i := range contract.MaxPlanDetails {
			plan.Details = append(plan.Details, contract.PlanItem{Kind: "Pod", Name: fmt.Sprintf("ns/pod-%d", i), Action: "evict", Note: note})
		}
		return plan, nil
	})
	syncIgnoringErrors(f, 1)

	p := f.get("p")
	require.Equal(t, v1alpha1.PipelinePlanned, p.Status.Phase)
	assert.LessOrEqual(t, objectBytes(t, p), maxObjectBytes)
	dropped := 0
	for _, s := range p.Status.Steps {
		require.NotNil(t, s.Plan, s.Name)
		assert.True(t, strings.HasPrefix(s.Plan.Summary, "plan of "+s.Name), s.Plan.Summary)
		assert.Equal(t, []string{"careful"}, s.Plan.Warnings, "warnings go only after every row")
		if s.Plan.Details == nil {
			dropped++
			assert.Contains(t, s.Plan.Summary, "100 rows")
		}
	}
	assert.Positive(t, dropped)
	assert.Less(t, dropped, len(p.Status.Steps), "only as many rows go as must")
	assert.Contains(t, f.events(), "Warning "+v1alpha1.ReasonStatusOverBudget)
}

// planned is a step status with a plan of rows rows and warnings warnings, each of about
// size bytes.
func planned(name string, rows, warnings, size int) v1alpha1.StepStatus {
	plan := &v1alpha1.StepPlan{Summary: "plan of " + name}
	for i := range rows {
		plan.Details = append(plan.Details, v1alpha1.PlanItem{Kind: "Pod", Name: fmt.Sprint(i), Action: "evict", Note: strings.Repeat("n", size)})
	}
	for range warnings {
		plan.Warnings = append(plan.Warnings, strings.Repeat("w", size))
	}
	return v1alpha1.StepStatus{Name: name, Phase: v1alpha1.StepPlanned, Plan: plan}
}

// heavy is a step status that carries its full bounds of what teardown and later steps
// need.
func heavy(name string) v1alpha1.StepStatus {
	s := v1alpha1.StepStatus{Name: name, Phase: v1alpha1.StepSucceeded,
		Outputs:   map[string]string{"out": strings.Repeat("o", contract.MaxOutputsSize-3)},
		HookState: map[string]string{"state": strings.Repeat("h", contract.MaxStateSize-5)},
		Ran: &v1alpha1.StepRun{Executor: "test.record", StepHash: "h", Generation: 1,
			Params: map[string]string{"p": strings.Repeat("r", v1alpha1.MaxRecordedParamsSize-1)}},
	}
	return s
}

func TestFitBudget(t *testing.T) {
	tests := []struct {
		name   string
		status v1alpha1.PipelineStatus
		limit  int
		want   shedCounts
		fits   bool
		check  func(t *testing.T, before, after *v1alpha1.PipelineStatus)
	}{
		{
			name:   "a status that fits is left as it is",
			status: v1alpha1.PipelineStatus{Steps: []v1alpha1.StepStatus{planned("a", 10, 2, 100), heavy("b")}},
			limit:  maxObjectBytes,
			fits:   true,
			check: func(t *testing.T, before, after *v1alpha1.PipelineStatus) {
				assert.Equal(t, before, after)
			},
		},
		{
			name: "the rows of the largest plans go first",
			status: v1alpha1.PipelineStatus{Steps: []v1alpha1.StepStatus{
				planned("a", 10, 1, 100), planned("b", 40, 1, 100), planned("c", 10, 1, 100)}},
			limit: 5000,
			want:  shedCounts{Rows: 40},
			fits:  true,
			check: func(t *testing.T, before, after *v1alpha1.PipelineStatus) {
				assert.Equal(t, before.Steps[0], after.Steps[0])
				assert.Equal(t, before.Steps[2], after.Steps[2])
				b := after.Steps[1].Plan
				assert.Zero(t, len(b.Details))
				assert.Equal(t, before.Steps[1].Plan.Warnings, b.Warnings)
				assert.True(t, strings.HasPrefix(b.Summary, "plan of b"), b.Summary)
				assert.Contains(t, b.Summary, "40 rows")
				assert.Len(t, before.Steps[1].Plan.Details, 40, "the plan it was given is not modified")
			},
		},
		{
			name: "warnings go once every row has gone",
			status: v1alpha1.PipelineStatus{Steps: []v1alpha1.StepStatus{
				planned("a", 5, 20, 200), planned("b", 5, 20, 200)}},
			limit: 6000,
			want:  shedCounts{Rows: 10, Warnings: 20},
			fits:  true,
			check: func(t *testing.T, _, after *v1alpha1.PipelineStatus) {
				for _, s := range after.Steps {
					assert.Zero(t, len(s.Plan.Details))
					assert.True(t, strings.HasPrefix(s.Plan.Summary, "plan of "+s.Name), s.Plan.Summary)
				}
				assert.Zero(t, len(after.Steps[0].Plan.Warnings), "the first of two equal plans goes first")
				assert.Contains(t, after.Steps[0].Plan.Summary, "20 warnings")
				assert.Len(t, after.Steps[1].Plan.Warnings, 20)
			},
		},
		{
			name: "retired steps' plans go too",
			status: v1alpha1.PipelineStatus{
				Steps:        []v1alpha1.StepStatus{planned("a", 1, 0, 10)},
				RetiredSteps: []v1alpha1.StepStatus{planned("old", 50, 0, 100)},
			},
			limit: 2000,
			want:  shedCounts{Rows: 50},
			fits:  true,
			check: func(t *testing.T, before, after *v1alpha1.PipelineStatus) {
				assert.Equal(t, before.Steps, after.Steps)
				assert.Zero(t, len(after.RetiredSteps[0].Plan.Details))
			},
		},
		{
			name: "outputs, hook state, run records and the template copy are never shed",
			status: v1alpha1.PipelineStatus{
				Steps: []v1alpha1.StepStatus{heavy("a"), heavy("b"), planned("c", 3, 1, 100)},
				Template: &v1alpha1.TemplateSnapshot{Name: "t", Steps: []v1alpha1.Step{{Name: "a", Executor: "test.record",
					With: map[string]string{"big": strings.Repeat("t", 10000)}}}},
			},
			limit: 20000,
			want:  shedCounts{Rows: 3, Warnings: 1},
			fits:  false,
			check: func(t *testing.T, before, after *v1alpha1.PipelineStatus) {
				assert.Equal(t, before.Steps[:2], after.Steps[:2])
				assert.Equal(t, before.Template, after.Template)
				assert.Equal(t, "plan of c", after.Steps[2].Plan.Summary[:len("plan of c")])
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPipeline(stepsOf("a")...)
			p.Status = *tt.status.DeepCopy()
			size, shed, err := shrinkToFit(p, tt.limit)
			require.NoError(t, err)

			assert.Equal(t, tt.want, shed)
			assert.Equal(t, objectBytes(t, p), size, "the size it reports is the object's")
			assert.Equal(t, tt.fits, size <= tt.limit, "size %d, limit %d", size, tt.limit)
			for _, s := range append(p.Status.Steps, p.Status.RetiredSteps...) {
				if s.Plan != nil {
					assert.LessOrEqual(t, len(s.Plan.Summary), contract.MaxPlanText, "the summary keeps its bound")
				}
			}
			tt.check(t, &tt.status, &p.Status)
		})
	}
}

// TestStatusTooLargeErrors: which refusals are about size.
func TestStatusTooLargeErrors(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "413", err: apierrors.NewRequestEntityTooLargeError("limit is 3145728"), want: true},
		{name: "etcd", err: errEtcdTooLarge, want: true},
		{name: "etcd, as the API server sends it", err: &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: 500, Message: "etcdserver: request is too large"}}, want: true},
		{name: "etcd wrapped", err: fmt.Errorf("update: %w", errEtcdTooLarge), want: true},
		{name: "other internal error", err: apierrors.NewInternalError(errors.New("etcdserver: leader changed"))},
		{name: "conflict", err: apierrors.NewConflict(v1alpha1.Resource("pipelines"), "p", errors.New("changed"))},
		{name: "invalid", err: apierrors.NewBadRequest("bad")},
		{name: "nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, statusTooLarge(tt.err))
		})
	}
}
