package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops/plantest"
)

func retireTemplate() *v1alpha1.PipelineTemplate {
	return &v1alpha1.PipelineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "retire-node", Namespace: "demo"},
		Spec: v1alpha1.PipelineTemplateSpec{Steps: []v1alpha1.Step{
			{Name: "cordon", Executor: "node.cordon", With: map[string]string{"node": "$(params.node)"}},
			{Name: "drain", Executor: "node.drain", With: map[string]string{"node": "$(params.node)"}},
		}},
	}
}

// answerTemplate takes the template, as the operator does, and plans its steps.
func answerTemplate(p *v1alpha1.Pipeline) {
	p.Status.Template = &v1alpha1.TemplateSnapshot{Name: "retire-node", Params: p.Spec.Params, Steps: retireTemplate().Spec.Steps}
	answerRetire(p)
}

func TestPlanTemplate(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  []string
		wantErr  string
	}{
		{
			name: "table", args: []string{"plan", "--template", "retire-node", "-p", "node=worker-7", "--service-account", "retirer"},
			wantOut: []string{
				"Plan of template demo/retire-node: Planned, 2 steps, 1 warning",
				"STEP     EXECUTOR      SUMMARY",
				"cordon   node.cordon   cordon node worker-7",
				"    KIND   NAME       ACTION   NOTE",
				"    Node   worker-7   change   spec.unschedulable: false → true",
				"    outputs: node=worker-7",
				"drain    node.drain    evict 2 pods from worker-7",
				"    KIND   NAME                ACTION   NOTE",
				"    Pod    web/web-1           evict    managed by ReplicaSet web-5d4",
				"    Pod    kube-system/proxy   skip     DaemonSet",
				"    ! the disruption budget web/web-pdb allows 0 disruptions: web/web-1 would wait",
			},
		},
		{name: "missing template", args: []string{"plan", "--template", "nope"}, wantCode: ExitError,
			wantErr: `error: get template demo/nope: pipelinetemplates.stepwise.dev "nope" not found`},
		{name: "bad parameter", args: []string{"plan", "--template", "retire-node", "-p", "node"}, wantCode: ExitError,
			wantErr: `error: parameter "node" is not NAME=VALUE`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, sw := fakeClients(retireTemplate())
			op := plantest.NewOperator(t, sw, answerTemplate)
			code, out, errOut := run(t, c, tt.args...)
			require.Equal(t, tt.wantCode, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			if tt.wantErr != "" {
				assert.Contains(t, errOut, tt.wantErr)
				assert.Empty(t, op.Created())
				return
			}
			assert.Equal(t, tt.wantOut, lines(out))
			assert.Empty(t, planPipelines(t, sw))
			require.Len(t, op.Created(), 1)
			p := op.Created()[0]
			assert.Equal(t, "plan-retire-node-", p.GenerateName)
			assert.Equal(t, v1alpha1.PipelineSpec{
				TemplateRef: &v1alpha1.TemplateRef{Name: "retire-node"}, Params: map[string]string{"node": "worker-7"},
				ServiceAccountName: "retirer", DryRun: true,
			}, p.Spec)
		})
	}
}

func TestPlanWatchesOnlyItsPipelines(t *testing.T) {
	// Another plan in the namespace, Failed: it must not end this one's wait.
	other := &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "plan-other-x", Namespace: "demo", Labels: map[string]string{pipelineops.PlanLabel: "true"}},
		Spec:   v1alpha1.PipelineSpec{DryRun: true, Steps: []v1alpha1.Step{{Name: "a", Executor: "x"}}},
		Status: v1alpha1.PipelineStatus{Phase: v1alpha1.PipelineFailed}}
	c, sw := fakeClients(retireTemplate(), other)
	plantest.NewOperator(t, sw, answerTemplate)
	code, out, errOut := run(t, c, "plan", "--template", "retire-node", "-p", "node=worker-7")
	require.Equal(t, ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Equal(t, []string{"plan-other-x"}, planPipelines(t, sw))
}

func TestPlanRefusesAPipelineThatRan(t *testing.T) {
	c, sw := fakeClients(retireTemplate())
	plantest.NewOperator(t, sw, func(p *v1alpha1.Pipeline) {
		p.Status.Phase = v1alpha1.PipelineRunning
		p.Status.Steps = []v1alpha1.StepStatus{{Name: "cordon", Phase: v1alpha1.StepSucceeded, Ran: &v1alpha1.StepRun{Executor: "node.cordon"}}}
	})
	code, _, errOut := run(t, c, "plan", "--template", "retire-node", "-p", "node=worker-7")
	assert.Equal(t, ExitError, code)
	assert.Contains(t, errOut, "the operator ran step cordon of dry-run pipeline demo/plan-retire-node-00000 instead of planning it")
}

// pipelinesGVR is the resource of Pipelines, as the fake clientset's tracker names it.
var pipelinesGVR = v1alpha1.SchemeGroupVersion.WithResource("pipelines")

func TestPlanRefusesAnAPIServerThatDropsDryRun(t *testing.T) {
	c, sw := fakeClients(retireTemplate())
	sw.PrependReactor("create", "pipelines", func(action k8stesting.Action) (bool, runtime.Object, error) {
		p := action.(k8stesting.CreateAction).GetObject().(*v1alpha1.Pipeline).DeepCopy()
		p.Name, p.Spec.DryRun = "plan-retire-node-old", false // an old CRD prunes the field
		return true, p, sw.Tracker().Create(pipelinesGVR, p, p.Namespace)
	})
	code, _, errOut := run(t, c, "plan", "--template", "retire-node", "-p", "node=worker-7")
	assert.Equal(t, ExitError, code)
	assert.Contains(t, errOut, "the API server dropped spec.dryRun of pipeline demo/plan-retire-node-old")
	assert.Empty(t, planPipelines(t, sw), "deleted at once")
}
