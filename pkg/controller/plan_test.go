package controller

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// planner is the fixture's recording executor that also plans, as test.plan.
type planner struct {
	*recordingExecutor
	plan func(req *executor.Request) (contract.Plan, error)
}

func (p planner) Name() string { return "test.plan" }

func (p planner) Plan(_ context.Context, req *executor.Request) (contract.Plan, error) {
	p.mu.Lock()
	p.requests = append(p.requests, *req)
	p.mu.Unlock()
	return p.plan(req)
}

// withPlanner registers a planner beside the fixture's test.record (which cannot plan).
func (f *fixture) withPlanner(plan func(req *executor.Request) (contract.Plan, error)) planner {
	f.t.Helper()
	p := planner{recordingExecutor: newRecordingExecutor("test.plan"), plan: plan}
	registry := executor.NewRegistry()
	require.NoError(f.t, registry.Register(f.exec, p))
	f.c.executors = registry
	return p
}

func dryRun(steps ...v1alpha1.Step) *v1alpha1.Pipeline {
	p := newPipeline(steps...)
	p.Finalizers = nil
	p.Spec.DryRun = true
	return p
}

// TestDryRunPlansEveryStepAndRunsNothing: each step is planned in order, with the planned
// outputs of the earlier ones resolved into its parameters; an executor that cannot plan
// says it would run; no hook runs, no run is recorded, no finalizer is added, and the
// pipeline ends Planned.
func TestDryRunPlansEveryStepAndRunsNothing(t *testing.T) {
	f := newFixture(t, dryRun(
		v1alpha1.Step{Name: "cordon", Executor: "test.plan", With: map[string]string{"node": "n1"}},
		v1alpha1.Step{Name: "terminate", Executor: "test.plan", With: map[string]string{"id": "$(steps.cordon.outputs.providerID)"}},
		v1alpha1.Step{Name: "record", Executor: "test.record"},
	))
	pl := f.withPlanner(func(req *executor.Request) (contract.Plan, error) {
		if req.Step == "cordon" {
			return contract.Plan{Summary: "cordon node n1", Details: []contract.PlanItem{{Kind: "Node", Name: "n1", Action: "cordon"}},
				Outputs: map[string]string{"providerID": "cloud://n1"}}, nil
		}
		return contract.Plan{Summary: "destroy " + req.Params["id"], Warnings: []string{"the VM is running"}}, nil
	})
	f.syncUntilIdle("p")

	got := f.get("p")
	assert.Equal(t, v1alpha1.PipelinePlanned, got.Status.Phase)
	assert.Empty(t, got.Finalizers, "a dry run tears nothing down: no finalizer")
	ready := readyCondition(got.Status.Conditions)
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	assert.Equal(t, v1alpha1.ReasonPlanned, ready.Reason)
	assert.Equal(t, "planned 3 steps, 1 warnings; nothing ran (dry run)", ready.Message)

	cordon := stepStatus(got, "cordon")
	assert.Equal(t, v1alpha1.StepPlanned, cordon.Phase)
	assert.Equal(t, &v1alpha1.StepPlan{Summary: "cordon node n1", Details: []v1alpha1.PlanItem{{Kind: "Node", Name: "n1", Action: "cordon"}}}, cordon.Plan)
	assert.Equal(t, map[string]string{"providerID": "cloud://n1"}, cordon.Outputs)
	assert.Equal(t, &v1alpha1.StepPlan{Summary: "destroy cloud://n1", Warnings: []string{"the VM is running"}}, stepStatus(got, "terminate").Plan)
	assert.Equal(t, &v1alpha1.StepPlan{Summary: contract.NoPlan().Summary}, stepStatus(got, "record").Plan)
	for _, s := range got.Status.Steps {
		assert.Nil(t, s.Ran, "%s: no run recorded", s.Name)
	}
	assert.Empty(t, f.exec.Calls(), "no hook ran")
	assert.Empty(t, pl.Calls(), "no hook ran")

	// Planned once: another sync asks nothing again.
	n := len(pl.requests)
	f.sync("p")
	assert.Len(t, pl.requests, n)

	// Deleted, it goes at once.
	f.update("p", func(p *v1alpha1.Pipeline) { p.DeletionTimestamp = &metav1.Time{Time: start} })
	f.sync("p")
	assert.Empty(t, f.exec.Calls())
}

// TestDryRunFailsAsARunWould: an unknown executor, a parameter error or a plan's error
// fail the step and the pipeline as a run would, and the steps after it are not planned.
func TestDryRunFailsAsARunWould(t *testing.T) {
	tests := []struct {
		name       string
		step       v1alpha1.Step
		planErr    error
		wantReason string
		wantMsg    string
	}{
		{name: "unknown executor", step: v1alpha1.Step{Name: "a", Executor: "no.such"}, wantReason: contract.ReasonUnknownExecutor},
		{name: "parameter", step: v1alpha1.Step{Name: "a", Executor: "test.plan", With: map[string]string{"count": "x"}},
			wantReason: contract.ReasonInvalidParameter, wantMsg: `parameter "count" is "x", not a whole number`},
		{name: "unresolved reference", step: v1alpha1.Step{Name: "a", Executor: "test.plan", With: map[string]string{"count": "$(params.nope)"}},
			wantReason: "InvalidReference"},
		{name: "plan error", step: v1alpha1.Step{Name: "a", Executor: "test.plan"}, planErr: contract.Permanent("Forbidden", errors.New("nodes is forbidden")),
			wantReason: "Forbidden", wantMsg: "nodes is forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, dryRun(tt.step, v1alpha1.Step{Name: "b", Executor: "test.plan"}))
			pl := f.withPlanner(func(*executor.Request) (contract.Plan, error) { return contract.Plan{Summary: "ok"}, tt.planErr })
			pl.params = []contract.Parameter{{Name: "count", Type: contract.ParamInt}}
			f.syncUntilIdle("p")
			got := f.get("p")
			assert.Equal(t, v1alpha1.PipelineFailed, got.Status.Phase)
			a := stepStatus(got, "a")
			assert.Equal(t, v1alpha1.StepFailed, a.Phase)
			assert.Equal(t, tt.wantReason, readyCondition(a.Conditions).Reason)
			if tt.wantMsg != "" {
				assert.Equal(t, tt.wantMsg, a.Message)
			}
			assert.Nil(t, stepStatus(got, "b").Plan, "not planned after a failure")
			assert.Contains(t, f.events(), "Warning PlanFailed")
		})
	}
}

// TestDryRunPlanHoldsNoSecret: a plan that quotes a Secret's value has it removed.
func TestDryRunPlanHoldsNoSecret(t *testing.T) {
	p := dryRun(v1alpha1.Step{Name: "a", Executor: "test.plan", With: map[string]string{"credentialsSecret": "creds"}})
	f := newFixture(t, p)
	f.clients.kube = kubefake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"},
		Data: map[string][]byte{"password": []byte("pl4n-pa55")}})
	f.withPlanner(func(req *executor.Request) (contract.Plan, error) {
		pw := string(req.Secret("credentialsSecret")["password"])
		return contract.Plan{Summary: "log in with " + pw, Details: []contract.PlanItem{{Kind: "Login", Name: pw, Action: "use"}}}, nil
	})
	f.syncUntilIdle("p")
	a := stepStatus(f.get("p"), "a")
	assert.Equal(t, "log in with [redacted]", a.Plan.Summary)
	assert.Equal(t, "[redacted]", a.Plan.Details[0].Name)
}

// TestDryRunPlansAsThePipelineItNames: with stepwise.dev/plan-as, the steps see the named
// pipeline's name and UID (what k8s.apply's ownership labels carry), or its name and the
// dry run's UID when it does not exist.
func TestDryRunPlansAsThePipelineItNames(t *testing.T) {
	real := newPipeline(v1alpha1.Step{Name: "a", Executor: "test.record"})
	real.Name, real.UID, real.Generation = "webapp", "uid-webapp", 4
	plan := dryRun(v1alpha1.Step{Name: "a", Executor: "test.plan"})
	plan.Annotations = map[string]string{v1alpha1.PlanAsAnnotation: "webapp"}
	f := newFixture(t, real, plan)
	pl := f.withPlanner(func(*executor.Request) (contract.Plan, error) { return contract.Plan{Summary: "ok"}, nil })
	f.syncUntilIdle("p")
	require.Len(t, pl.requests, 1)
	assert.Equal(t, contract.PipelineRef{Namespace: "ns", Name: "webapp", UID: "uid-webapp", Generation: 4}, pl.requests[0].Pipeline)

	gone := dryRun(v1alpha1.Step{Name: "a", Executor: "test.plan"})
	gone.Annotations = map[string]string{v1alpha1.PlanAsAnnotation: "not-yet"}
	g := newFixture(t, gone)
	pg := g.withPlanner(func(*executor.Request) (contract.Plan, error) { return contract.Plan{Summary: "ok"}, nil })
	g.syncUntilIdle("p")
	require.Len(t, pg.requests, 1)
	assert.Equal(t, contract.PipelineRef{Namespace: "ns", Name: "not-yet", UID: "uid-1", Generation: 1}, pg.requests[0].Pipeline,
		"its own UID: the named pipeline owns nothing yet")

	// A resting pipeline is not in the cache: it is read from the API server.
	r := newFixture(t, real.DeepCopy(), plan.DeepCopy())
	require.NoError(t, r.indexer.Delete(real))
	pr := r.withPlanner(func(*executor.Request) (contract.Plan, error) { return contract.Plan{Summary: "ok"}, nil })
	r.syncUntilIdle("p")
	require.Len(t, pr.requests, 1)
	assert.Equal(t, contract.PipelineRef{Namespace: "ns", Name: "webapp", UID: "uid-webapp", Generation: 4}, pr.requests[0].Pipeline,
		"the resting pipeline's UID")
}

// TestDryRunSaysAStepWaitsForApproval: a plan shows, first of a step's rows, that a run
// would wait for people before it, and waits for no one itself.
func TestDryRunSaysAStepWaitsForApproval(t *testing.T) {
	terminate := v1alpha1.Step{Name: "terminate", Executor: "test.plan",
		Approval: &v1alpha1.ApprovalPolicy{Approvals: 2, Groups: []string{"sre"}, FourEyes: true}}
	f := newFixture(t, dryRun(terminate))
	f.withPlanner(func(*executor.Request) (contract.Plan, error) {
		return contract.Plan{Summary: "destroy vm-1", Details: []contract.PlanItem{{Kind: "VirtualMachine", Name: "vm-1", Action: "destroy"}}}, nil
	})
	f.syncUntilIdle("p")
	got := f.get("p")
	assert.Equal(t, v1alpha1.PipelinePlanned, got.Status.Phase)
	assert.Equal(t, []v1alpha1.PlanItem{
		{Kind: "Approval", Name: "terminate", Action: "wait", Note: "2 approval(s) by groups sre, not who made or changed it before the step runs"},
		{Kind: "VirtualMachine", Name: "vm-1", Action: "destroy"},
	}, stepStatus(got, "terminate").Plan.Details)
	assert.Nil(t, stepStatus(got, "terminate").Approval, "a plan waits for no one")
}
