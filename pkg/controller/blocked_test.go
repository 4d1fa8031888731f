package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// A pipeline says what holds it back as data: kind, object, step, since when and what
// would let it go on; the time stays that of the first sync that saw it; nothing once it
// runs freely or is done.
func TestAPipelineSaysWhatHoldsItBack(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(p *v1alpha1.Pipeline)
		setup func(f *fixture)
		want  []v1alpha1.Blocker // without Since
	}{
		{name: "a drain refused by a PodDisruptionBudget",
			setup: func(f *fixture) {
				f.exec.on("b", v1alpha1.HookCreate, func(context.Context, *executor.Request) (contract.Result, error) {
					return contract.Wait(10*time.Second, "1 pod left").Blocked(contract.Blocker{Kind: v1alpha1.KindPodDisruptionBudget, Namespace: "apps", Name: "web"}), nil
				})
			},
			want: []v1alpha1.Blocker{{Kind: v1alpha1.KindPodDisruptionBudget, Namespace: "apps", Name: "web", Step: "b",
				Unblock: "the PodDisruptionBudget apps/web allows a disruption: more of its pods healthy, or a lower minAvailable (kubectl get pdb web -n apps)"}}},
		{name: "a step awaiting approval",
			edit: func(p *v1alpha1.Pipeline) { p.Spec.Steps[1].Approval = &v1alpha1.ApprovalPolicy{Approvals: 2} },
			want: []v1alpha1.Blocker{{Kind: v1alpha1.BlockerApproval, Step: "b", Unblock: "2 more approval(s): kubectl stepwise approve p b -n ns"}}},
		{name: "a step failed for good",
			setup: func(f *fixture) {
				f.exec.on("b", v1alpha1.HookCreate, failWith(contract.Permanent("Forbidden", errBoom)))
			},
			want: []v1alpha1.Blocker{{Kind: v1alpha1.BlockerStepFailed, Step: "b",
				Unblock: "annotate stepwise.dev/retry=b to retry it (kubectl annotate pipeline p -n ns stepwise.dev/retry=b), or edit the spec"}}},
		{name: "suspended", edit: func(p *v1alpha1.Pipeline) { p.Spec.Suspend = true },
			want: []v1alpha1.Blocker{{Kind: v1alpha1.BlockerSuspended, Step: "a", Unblock: "kubectl stepwise resume p -n ns (spec.suspend false)"}}},
		{name: "running freely",
			setup: func(f *fixture) { f.exec.on("b", v1alpha1.HookCreate, waitFor(time.Minute, "working")) }},
		{name: "succeeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := syncedTwoSteps(t, tt.edit, tt.setup)
			first := f.get("p").Status.BlockedBy
			f.clock.Step(time.Minute)
			f.syncUntilIdle("p")
			got := f.get("p").Status.BlockedBy
			require.Len(t, got, len(tt.want), "%+v", got)
			for i := range got {
				require.NotNil(t, got[i].Since)
				assert.Equal(t, first[i].Since, got[i].Since, "since when it first held, not the last sync")
				got[i].Since = nil
			}
			assert.Equal(t, tt.want, nilIfEmpty(got))
		})
	}
}

func nilIfEmpty(b []v1alpha1.Blocker) []v1alpha1.Blocker {
	if len(b) == 0 {
		return nil
	}
	return b
}
