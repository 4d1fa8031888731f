package controller

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/stepwise-dev/stepwise/internal/argocdtest"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// kstatusOf is what GitOps tools say of p: cli-utils' kstatus, which Flux and kpt use to
// wait on what they applied.
func kstatusOf(t *testing.T, p *v1alpha1.Pipeline) status.Status {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	require.NoError(t, err)
	res, err := status.Compute(&unstructured.Unstructured{Object: obj})
	require.NoError(t, err)
	return res.Status
}

// A GitOps apply that waits on a pipeline ends when it succeeds (Current) or fails
// (Failed), and waits while it runs, retries, waits for a person or for its template
// (InProgress): the Reconciling and Stalled conditions beside Ready, and observedGeneration.
func TestKstatusSaysWhatAPipelineIsDoing(t *testing.T) {
	tests := []struct {
		name  string
		setup func(f *fixture)
		edit  func(p *v1alpha1.Pipeline)
		want  status.Status
		argo  string // Argo CD's health, by deploy/argocd/pipeline-health.lua
	}{
		{name: "running", want: status.InProgressStatus, argo: "Progressing",
			setup: func(f *fixture) { f.exec.on("b", v1alpha1.HookCreate, waitFor(time.Minute, "draining")) }},
		{name: "retrying", want: status.InProgressStatus, argo: "Progressing",
			setup: func(f *fixture) { f.exec.on("b", v1alpha1.HookCreate, failWith(errors.New("connection refused"))) }},
		{name: "succeeded", want: status.CurrentStatus, argo: "Healthy"},
		{name: "failed", want: status.FailedStatus, argo: "Degraded",
			setup: func(f *fixture) {
				f.exec.on("b", v1alpha1.HookCreate, failWith(contract.Permanent("PodDisruptionBudget", errBoom)))
			}},
		{name: "failed and torn down", want: status.FailedStatus, argo: "Degraded",
			edit: func(p *v1alpha1.Pipeline) { p.Spec.OnFailure = v1alpha1.FailureTeardown },
			setup: func(f *fixture) {
				f.exec.on("b", v1alpha1.HookCreate, failWith(contract.Permanent("PodDisruptionBudget", errBoom)))
			}},
		{name: "suspended", want: status.InProgressStatus, argo: "Suspended",
			edit: func(p *v1alpha1.Pipeline) { p.Spec.Suspend = true }},
		{name: "awaiting approval", want: status.InProgressStatus, argo: "Suspended",
			edit: func(p *v1alpha1.Pipeline) { p.Spec.Steps[1].Approval = &v1alpha1.ApprovalPolicy{Approvals: 1} }},
		{name: "planned (dry run)", want: status.CurrentStatus, argo: "Healthy",
			edit: func(p *v1alpha1.Pipeline) { p.Spec.DryRun = true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := syncedTwoSteps(t, tt.edit, tt.setup)
			got := f.get("p")
			assert.Equal(t, tt.want, kstatusOf(t, got), "kstatus; phase %s, conditions %+v", got.Status.Phase, got.Status.Conditions)
			assert.Equal(t, tt.argo, argoHealthOf(t, got), "Argo CD; phase %s, conditions %+v", got.Status.Phase, got.Status.Conditions)
		})
	}
}

// An edit the operator has not seen yet is in progress, whatever the status says of the
// spec before it.
func TestKstatusWaitsForAnEditToBeObserved(t *testing.T) {
	f := newFixture(t, newPipeline(stepsOf("a")...))
	f.syncUntilIdle("p")
	p := f.get("p")
	require.Equal(t, status.CurrentStatus, kstatusOf(t, p))
	p.Generation++
	assert.Equal(t, status.InProgressStatus, kstatusOf(t, p))
	assert.Equal(t, "Progressing", argoHealthOf(t, p))
}

// argoHealthOf runs Argo CD's health check of deploy/argocd on p.
func argoHealthOf(t *testing.T, p *v1alpha1.Pipeline) string {
	t.Helper()
	health, err := argocdtest.Health(filepath.Join("..", "..", "deploy", "argocd", "pipeline-health.lua"), p)
	require.NoError(t, err)
	return health
}
