package trigger

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/stepwise-dev/stepwise/internal/argocdtest"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
)

// What GitOps tools say of a trigger: acting (its window or budget waited for included)
// is Current and Healthy; stopped until a person acts is Failed (kstatus) and Degraded or,
// paused, Suspended (Argo CD); an edit not yet seen is in progress.
func TestGitOpsToolsSayWhatATriggerIsDoing(t *testing.T) {
	tests := []struct {
		name    string
		objects func() []runtime.Object
		edit    func(tr *v1alpha1.PipelineTrigger)
		kstatus status.Status
		argo    string
	}{
		{name: "acting", kstatus: status.CurrentStatus, argo: "Healthy"},
		{name: "paused", kstatus: status.FailedStatus, argo: "Suspended",
			edit: func(tr *v1alpha1.PipelineTrigger) { tr.Spec.Pause = &v1alpha1.TriggerPause{By: "alice"} }},
		{name: "suspended", kstatus: status.CurrentStatus, argo: "Suspended",
			edit: func(tr *v1alpha1.PipelineTrigger) { tr.Spec.Suspend = true }},
		{name: "its template missing", kstatus: status.FailedStatus, argo: "Degraded",
			objects: func() []runtime.Object { return objs(triggertest.Trigger()) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := objs(triggertest.Trigger(), newTemplate("retire-node"))
			if tt.objects != nil {
				in = tt.objects()
			}
			f := newFixture(t, in)
			if tt.edit != nil {
				f.updateTrigger("retire", tt.edit)
			}
			f.sync("retire")
			got := f.trigger("retire")
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(got)
			require.NoError(t, err)
			res, err := status.Compute(&unstructured.Unstructured{Object: obj})
			require.NoError(t, err)
			assert.Equal(t, tt.kstatus, res.Status, "kstatus; conditions %+v", got.Status.Conditions)
			health, err := argocdtest.Health(filepath.Join("..", "..", "deploy", "argocd", "pipelinetrigger-health.lua"), got)
			require.NoError(t, err)
			assert.Equal(t, tt.argo, health, "Argo CD; conditions %+v", got.Status.Conditions)

			got.Generation++
			obj, err = runtime.DefaultUnstructuredConverter.ToUnstructured(got)
			require.NoError(t, err)
			res, err = status.Compute(&unstructured.Unstructured{Object: obj})
			require.NoError(t, err)
			assert.Equal(t, status.InProgressStatus, res.Status, "an edit not yet seen")
		})
	}
}
