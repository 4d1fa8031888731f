package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops/plantest"
)

// setPlanned sets step i of p Planned with plan and outputs.
func setPlanned(p *v1alpha1.Pipeline, i int, name, executor string, plan *v1alpha1.StepPlan, outputs map[string]string) {
	for len(p.Status.Steps) <= i {
		p.Status.Steps = append(p.Status.Steps, v1alpha1.StepStatus{})
	}
	p.Status.Steps[i] = v1alpha1.StepStatus{Name: name, Executor: executor, Phase: v1alpha1.StepPlanned, Plan: plan, Outputs: outputs,
		Message: plan.Summary}
}

func planned(p *v1alpha1.Pipeline) {
	p.Status.ObservedGeneration = p.Generation
	p.Status.Phase = v1alpha1.PipelinePlanned
	p.Status.Conditions = ready(metav1.ConditionTrue, "Planned", "planned 2 steps, 1 warnings; nothing ran (dry run)", time.Second)
}

// answerRetire plans the two steps of retire.yaml, or of the template retire-node.
func answerRetire(p *v1alpha1.Pipeline) {
	node := "worker-3"
	if n := p.Spec.Params["node"]; n != "" {
		node = n
	}
	setPlanned(p, 0, "cordon", "node.cordon", &v1alpha1.StepPlan{
		Summary: "cordon node " + node,
		Details: []v1alpha1.PlanItem{{Kind: "Node", Name: node, Action: "change", Note: "spec.unschedulable: false → true"}},
	}, map[string]string{"node": node})
	setPlanned(p, 1, "drain", "node.drain", &v1alpha1.StepPlan{
		Summary: "evict 2 pods from " + node,
		Details: []v1alpha1.PlanItem{
			{Kind: "Pod", Name: "web/web-1", Action: "evict", Note: "managed by ReplicaSet web-5d4"},
			{Kind: "Pod", Name: "kube-system/proxy", Action: "skip", Note: "DaemonSet"},
		},
		Warnings: []string{"the disruption budget web/web-pdb allows 0 disruptions: web/web-1 would wait"},
	}, nil)
	planned(p)
}

// failDrain fails the plan at its second step, as the operator does for a Forbidden.
func failDrain(p *v1alpha1.Pipeline) {
	setPlanned(p, 0, "cordon", "node.cordon", &v1alpha1.StepPlan{Summary: "cordon node worker-3"}, nil)
	p.Status.Steps = append(p.Status.Steps, v1alpha1.StepStatus{Name: "drain", Executor: "node.drain", Phase: v1alpha1.StepFailed,
		Message: `pods is forbidden: User "system:serviceaccount:demo:default" cannot list pods`})
	p.Status.Phase, p.Status.CurrentStep = v1alpha1.PipelineFailed, "drain"
	p.Status.Conditions = ready(metav1.ConditionFalse, "StepFailed", "step drain cannot be planned: pods is forbidden", time.Second)
}

const retireManifest = `apiVersion: stepwise.dev/v1alpha1
kind: Pipeline
metadata:
  name: retire
  labels:
    stepwise.dev/trigger: someone-else
spec:
  suspend: true
  steps:
  - name: cordon
    executor: node.cordon
    with: {node: worker-3}
  - name: drain
    executor: node.drain
    with: {node: worker-3}
  - name: delete
    executor: node.delete
    with: {node: worker-3}
`

// retirePlanTable is the table of answerRetire for retire.yaml.
var retirePlanTable = []string{
	"STEP     EXECUTOR      SUMMARY",
	"cordon   node.cordon   cordon node worker-3",
	"    KIND   NAME       ACTION   NOTE",
	"    Node   worker-3   change   spec.unschedulable: false → true",
	"    outputs: node=worker-3",
	"drain    node.drain    evict 2 pods from worker-3",
	"    KIND   NAME                ACTION   NOTE",
	"    Pod    web/web-1           evict    managed by ReplicaSet web-5d4",
	"    Pod    kube-system/proxy   skip     DaemonSet",
	"    ! the disruption budget web/web-pdb allows 0 disruptions: web/web-1 would wait",
	"delete   node.delete   (not planned)",
}

// runIn runs kubectl-stepwise with stdin and returns its exit code and output.
func runIn(t *testing.T, c *Clients, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut}
	code := Execute(context.Background(), append(args, "--namespace", "demo"), streams, func() (*Clients, error) { return c, nil })
	return code, out.String(), errOut.String()
}

func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

// planPipelines are the dry-run pipelines left in namespace demo.
func planPipelines(t *testing.T, sw *fake.Clientset) []string {
	t.Helper()
	list, err := sw.StepwiseV1alpha1().Pipelines("demo").List(context.Background(), metav1.ListOptions{LabelSelector: pipelineops.PlanLabel + "=true"})
	require.NoError(t, err)
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names
}

func TestPlanFile(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	retire := file("retire.yaml", retireManifest)
	jsonData, err := yaml.YAMLToJSON([]byte(retireManifest))
	require.NoError(t, err)
	retireJSON := file("retire.json", string(jsonData))

	tests := []struct {
		name     string
		args     []string
		stdin    string
		answer   func(p *v1alpha1.Pipeline)
		wantCode int
		wantOut  []string // exact lines
		wantErr  string
		check    func(t *testing.T, out string)
		wantLeft []string // dry-run pipelines left
	}{
		{
			name: "table", args: []string{"plan", "-f", retire}, answer: answerRetire,
			wantOut: append([]string{"Plan of pipeline demo/retire: Planned, 2 steps, 1 warning"}, retirePlanTable...),
		},
		{
			name: "stdin, JSON", args: []string{"plan", "-f", "-"}, stdin: string(jsonData), answer: answerRetire,
			wantOut: append([]string{"Plan of pipeline demo/retire: Planned, 2 steps, 1 warning"}, retirePlanTable...),
		},
		{
			name: "keep", args: []string{"plan", "-f", retireJSON, "--keep"}, answer: answerRetire,
			wantOut: append(append([]string{"Plan of pipeline demo/retire: Planned, 2 steps, 1 warning"}, retirePlanTable...),
				"pipeline.stepwise.dev/plan-retire-00000 kept in demo (a dry run: deleting it tears nothing down)"),
			wantLeft: []string{"plan-retire-00000"},
		},
		{
			name: "json", args: []string{"plan", "-f", retire, "-o", "json"}, answer: answerRetire,
			check: func(t *testing.T, out string) {
				var got planReport
				require.NoError(t, json.Unmarshal([]byte(out), &got), out)
				want := &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "plan-retire-00000", Namespace: "demo"}}
				answerRetire(want)
				assert.Equal(t, planReport{
					DryRun: "plan-retire-00000", Namespace: "demo", Phase: v1alpha1.PipelinePlanned,
					Reason: "Planned", Message: "planned 2 steps, 1 warnings; nothing ran (dry run)",
					Steps: []stepReport{
						{Name: "cordon", Executor: "node.cordon", Phase: v1alpha1.StepPlanned, Plan: want.Status.Steps[0].Plan,
							Outputs: map[string]string{"node": "worker-3"}, Message: "cordon node worker-3"},
						{Name: "drain", Executor: "node.drain", Phase: v1alpha1.StepPlanned, Plan: want.Status.Steps[1].Plan,
							Message: "evict 2 pods from worker-3"},
						{Name: "delete", Executor: "node.delete"},
					},
				}, got)
			},
		},
		{
			name: "yaml, kept: the name goes to stderr", args: []string{"plan", "-f", retire, "-o", "yaml", "--keep"}, answer: answerRetire,
			check: func(t *testing.T, out string) {
				var got planReport
				require.NoError(t, yaml.UnmarshalStrict([]byte(out), &got), out)
				assert.True(t, got.Kept)
				assert.Len(t, got.Steps, 3)
			},
			wantErr: "pipeline.stepwise.dev/plan-retire-00000 kept in demo", wantLeft: []string{"plan-retire-00000"},
		},
		{
			name: "failed plan exits 2", args: []string{"plan", "-f", retire}, answer: failDrain, wantCode: ExitPipelineFailed,
			wantOut: []string{
				"Plan of pipeline demo/retire: Failed at step drain",
				"STEP     EXECUTOR      SUMMARY",
				"cordon   node.cordon   cordon node worker-3",
				`drain    node.drain    FAILED: pods is forbidden: User "system:serviceaccount:demo:default" cannot list pods`,
				"delete   node.delete   (not planned)",
				"Failed: StepFailed: step drain cannot be planned: pods is forbidden",
			},
		},
		{
			name: "failed plan as JSON exits 2", args: []string{"plan", "-f", retire, "-o", "json"}, answer: failDrain, wantCode: ExitPipelineFailed,
			check: func(t *testing.T, out string) {
				var got planReport
				require.NoError(t, json.Unmarshal([]byte(out), &got), out)
				assert.Equal(t, v1alpha1.PipelineFailed, got.Phase)
				assert.Equal(t, "StepFailed", got.Reason)
				assert.Equal(t, v1alpha1.StepFailed, got.Steps[1].Phase)
				assert.Contains(t, got.Steps[1].Message, "cannot list pods")
			},
		},
		{
			name: "parameter error before any step", args: []string{"plan", "-f", retire}, wantCode: ExitPipelineFailed,
			answer: func(p *v1alpha1.Pipeline) {
				p.Status.Phase = v1alpha1.PipelineFailed
				p.Status.Conditions = ready(metav1.ConditionFalse, "InvalidParameters", "params.node is required", time.Second)
			},
			wantOut: []string{
				"Plan of pipeline demo/retire: Failed",
				"STEP     EXECUTOR      SUMMARY",
				"cordon   node.cordon   (not planned)",
				"drain    node.drain    (not planned)",
				"delete   node.delete   (not planned)",
				"Failed: InvalidParameters: params.node is required",
			},
		},
		{
			name: "cluster text is escaped", args: []string{"plan", "-f", retire},
			answer: func(p *v1alpha1.Pipeline) {
				setPlanned(p, 0, "cordon", "node.cordon", &v1alpha1.StepPlan{
					Summary:  "cordon\x1b]0;owned\x07 node",
					Details:  []v1alpha1.PlanItem{{Kind: "Node", Name: "w\u009b3", Action: "change", Note: "a\nb\tc"}},
					Warnings: []string{"\x1b[2Jcleared"},
				}, map[string]string{"k\x1b": "v\r"})
				planned(p)
			},
			check: func(t *testing.T, out string) {
				assert.NotContains(t, out, "\x1b")
				assert.NotContains(t, out, "\u009b")
				assert.Equal(t, []string{
					"Plan of pipeline demo/retire: Planned, 1 step, 1 warning",
					"STEP     EXECUTOR      SUMMARY",
					`cordon   node.cordon   cordon\x1b]0;owned\x07 node`,
					"    KIND   NAME       ACTION   NOTE",
					`    Node   w\u009b3   change   a b c`,
					`    ! \x1b[2Jcleared`,
					`    outputs: k\x1b=v`,
					"drain    node.drain    (not planned)",
					"delete   node.delete   (not planned)",
				}, lines(out))
			},
		},
		{
			name: "timeout", args: []string{"plan", "-f", retire, "--timeout", "300ms"}, wantCode: ExitError,
			wantErr: "error: no plan after 300ms: dry-run pipeline demo/plan-retire-00000 is still Pending (is the operator running, and recent enough to plan?)",
		},
		{
			name: "timeout, kept", args: []string{"plan", "-f", retire, "--timeout", "300ms", "--keep"}, wantCode: ExitError,
			wantOut: []string{"pipeline.stepwise.dev/plan-retire-00000 kept in demo (a dry run: deleting it tears nothing down)"},
			wantErr: "error: no plan after 300ms", wantLeft: []string{"plan-retire-00000"},
		},
		{
			name: "the manifest's namespace against -n", args: []string{"plan", "-f", "-"}, wantCode: ExitError,
			stdin:   strings.Replace(retireManifest, "name: retire\n", "name: retire\n  namespace: prod\n", 1),
			wantErr: "error: the namespace of - (prod) does not match --namespace (demo)",
		},
		{
			name: "two objects", args: []string{"plan", "-f", "-"}, stdin: retireManifest + "---\n" + retireManifest, wantCode: ExitError,
			wantErr: "error: - holds 2 objects: plan takes one Pipeline",
		},
		{
			name: "not a Pipeline", args: []string{"plan", "-f", "-"}, wantCode: ExitError,
			stdin:   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
			wantErr: "error: - holds a v1 ConfigMap, not a stepwise.dev/v1alpha1 Pipeline",
		},
		{
			name: "a misspelt field", args: []string{"plan", "-f", "-"}, wantCode: ExitError,
			stdin:   strings.Replace(retireManifest, "executor: node.drain", "exector: node.drain", 1),
			wantErr: `error: decode the Pipeline of -: error unmarshaling JSON: while decoding JSON: json: unknown field "exector"`,
		},
		{name: "no source", args: []string{"plan"}, wantCode: ExitError, wantErr: "at least one of the flags in the group [filename template trigger] is required"},
		{name: "two sources", args: []string{"plan", "-f", retire, "--trigger", "t"}, wantCode: ExitError, wantErr: "were all set"},
		{name: "-p without --template", args: []string{"plan", "-f", retire, "-p", "a=b"}, wantCode: ExitError, wantErr: "--param and --service-account go with --template"},
		{name: "--max without --trigger", args: []string{"plan", "-f", retire, "--max", "2"}, wantCode: ExitError, wantErr: "--max goes with --trigger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, sw := fakeClients()
			op := plantest.NewOperator(t, sw, tt.answer)
			code, out, errOut := runIn(t, c, tt.stdin, tt.args...)
			require.Equal(t, tt.wantCode, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			if tt.wantOut != nil {
				assert.Equal(t, tt.wantOut, lines(out))
			}
			if tt.check != nil {
				tt.check(t, out)
			}
			if tt.wantErr != "" {
				assert.Contains(t, errOut, tt.wantErr)
			} else {
				assert.Empty(t, errOut)
			}
			assert.Equal(t, tt.wantLeft, planPipelines(t, sw), "the dry-run pipeline is deleted at the end, unless kept")
			for _, p := range op.Created() {
				assert.Equal(t, "plan-retire-", p.GenerateName)
				assert.Equal(t, map[string]string{pipelineops.PlanLabel: "true"}, p.Labels, "none of the manifest's labels: a trigger's would count it")
				assert.Equal(t, map[string]string{v1alpha1.PlanAsAnnotation: "retire"}, p.Annotations, "it plans as the pipeline the manifest names")
				assert.True(t, p.Spec.DryRun)
				assert.False(t, p.Spec.Suspend)
				assert.Equal(t, []string{"cordon", "drain", "delete"}, []string{p.Spec.Steps[0].Name, p.Spec.Steps[1].Name, p.Spec.Steps[2].Name})
			}
		})
	}
}
