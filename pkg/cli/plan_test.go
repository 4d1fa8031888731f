package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

var pipelinesGVR = v1alpha1.SchemeGroupVersion.WithResource("pipelines")

// fakeOperator plays the operator for plan: it names each pipeline the command creates (the
// fake clientset does not honour generateName) and, once the command watches, gives it the
// status answer returns. A nil answer never answers.
type fakeOperator struct {
	sw       *fake.Clientset
	answer   func(p *v1alpha1.Pipeline)
	watching chan struct{}
	once     sync.Once
	wg       sync.WaitGroup

	mu      sync.Mutex
	created []*v1alpha1.Pipeline
}

func newFakeOperator(t *testing.T, sw *fake.Clientset, answer func(p *v1alpha1.Pipeline)) *fakeOperator {
	t.Helper()
	op := &fakeOperator{sw: sw, answer: answer, watching: make(chan struct{})}
	sw.PrependWatchReactor("pipelines", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w, err := sw.Tracker().Watch(pipelinesGVR, action.GetNamespace())
		op.once.Do(func() { close(op.watching) })
		return true, w, err
	})
	sw.PrependReactor("create", "pipelines", func(action k8stesting.Action) (bool, runtime.Object, error) {
		p := action.(k8stesting.CreateAction).GetObject().(*v1alpha1.Pipeline).DeepCopy()
		op.mu.Lock()
		if p.Name == "" {
			p.Name = fmt.Sprintf("%s%05d", p.GenerateName, len(op.created))
		}
		op.created = append(op.created, p.DeepCopy())
		op.mu.Unlock()
		if err := sw.Tracker().Create(pipelinesGVR, p, p.Namespace); err != nil {
			return true, nil, err
		}
		if answer != nil {
			op.wg.Add(1)
			go op.plan(p.DeepCopy())
		}
		return true, p, nil
	})
	t.Cleanup(op.wg.Wait)
	return op
}

// plan answers once the command watches, so that the answer comes through the watch.
func (op *fakeOperator) plan(p *v1alpha1.Pipeline) {
	defer op.wg.Done()
	select {
	case <-op.watching:
	case <-time.After(10 * time.Second):
		return
	}
	op.answer(p)
	_ = op.sw.Tracker().Update(pipelinesGVR, p, p.Namespace)
}

func (op *fakeOperator) createdPipelines() []*v1alpha1.Pipeline {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.created
}

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
	list, err := sw.StepwiseV1alpha1().Pipelines("demo").List(context.Background(), metav1.ListOptions{LabelSelector: planLabel + "=true"})
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
			op := newFakeOperator(t, sw, tt.answer)
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
			for _, p := range op.createdPipelines() {
				assert.Equal(t, "plan-retire-", p.GenerateName)
				assert.Equal(t, map[string]string{planLabel: "true"}, p.Labels, "none of the manifest's labels: a trigger's would count it")
				assert.Equal(t, map[string]string{v1alpha1.PlanAsAnnotation: "retire"}, p.Annotations, "it plans as the pipeline the manifest names")
				assert.True(t, p.Spec.DryRun)
				assert.False(t, p.Spec.Suspend)
				assert.Equal(t, []string{"cordon", "drain", "delete"}, []string{p.Spec.Steps[0].Name, p.Spec.Steps[1].Name, p.Spec.Steps[2].Name})
			}
		})
	}
}

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
			op := newFakeOperator(t, sw, answerTemplate)
			code, out, errOut := run(t, c, tt.args...)
			require.Equal(t, tt.wantCode, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			if tt.wantErr != "" {
				assert.Contains(t, errOut, tt.wantErr)
				assert.Empty(t, op.createdPipelines())
				return
			}
			assert.Equal(t, tt.wantOut, lines(out))
			assert.Empty(t, planPipelines(t, sw))
			require.Len(t, op.createdPipelines(), 1)
			p := op.createdPipelines()[0]
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
	other := &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "plan-other-x", Namespace: "demo", Labels: map[string]string{planLabel: "true"}},
		Spec:   v1alpha1.PipelineSpec{DryRun: true, Steps: []v1alpha1.Step{{Name: "a", Executor: "x"}}},
		Status: v1alpha1.PipelineStatus{Phase: v1alpha1.PipelineFailed}}
	c, sw := fakeClients(retireTemplate(), other)
	newFakeOperator(t, sw, answerTemplate)
	code, out, errOut := run(t, c, "plan", "--template", "retire-node", "-p", "node=worker-7")
	require.Equal(t, ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Equal(t, []string{"plan-other-x"}, planPipelines(t, sw))
}

func TestPlanRefusesAPipelineThatRan(t *testing.T) {
	c, sw := fakeClients(retireTemplate())
	newFakeOperator(t, sw, func(p *v1alpha1.Pipeline) {
		p.Status.Phase = v1alpha1.PipelineRunning
		p.Status.Steps = []v1alpha1.StepStatus{{Name: "cordon", Phase: v1alpha1.StepSucceeded, Ran: &v1alpha1.StepRun{Executor: "node.cordon"}}}
	})
	code, _, errOut := run(t, c, "plan", "--template", "retire-node", "-p", "node=worker-7")
	assert.Equal(t, ExitError, code)
	assert.Contains(t, errOut, "the operator ran step cordon of dry-run pipeline demo/plan-retire-node-00000 instead of planning it")
}

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

func TestDryRunNames(t *testing.T) {
	long := strings.Repeat("a", 60)
	assert.Equal(t, "plan-"+strings.Repeat("a", 52)+"-", dryRunOf(&v1alpha1.Pipeline{}, long).GenerateName)
	assert.Equal(t, "plan-ab-", dryRunOf(&v1alpha1.Pipeline{}, strings.Repeat("x", 0)+"ab").GenerateName)
	assert.Equal(t, "plan-"+strings.Repeat("a", 51)+"-", dryRunOf(&v1alpha1.Pipeline{}, strings.Repeat("a", 51)+".b").GenerateName,
		"a cut name ends with a letter or digit")
}

// fakeNode is a Node for the trigger's fake dynamic client.
func fakeNode(name, uid string, created time.Duration, labels map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{
			"name": name, "uid": uid, "labels": labels,
			"creationTimestamp": t0.Add(created).Format(time.RFC3339),
		},
	}}
}

func triggerClients(t *testing.T, trig *v1alpha1.PipelineTrigger, pipelines ...runtime.Object) (*Clients, *fake.Clientset) {
	t.Helper()
	retire := map[string]any{"stepwise.dev/retire": "true", "pool": "blue"}
	nodes := []runtime.Object{
		fakeNode("worker-1", "uid-1", 2*time.Hour, retire),
		fakeNode("worker-2", "uid-2", time.Hour, retire), // has a pipeline
		fakeNode("worker-3", "uid-3", 0, retire),         // the oldest
		fakeNode("worker-4", "uid-4", 3*time.Hour, retire),
		fakeNode("worker-5", "uid-5", 30*time.Minute, map[string]any{"stepwise.dev/retire": "true"}), // no pool label
		fakeNode("worker-0", "uid-0", -time.Hour, map[string]any{"pool": "blue"}),                    // not labelled for retirement
	}
	nodesGVR := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{nodesGVR: "NodeList"}, nodes...)
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{corev1.SchemeGroupVersion})
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Node"), meta.RESTScopeRoot)
	objs := append([]runtime.Object{trig, retireTemplate()}, pipelines...)
	sw := fake.NewSimpleClientset(objs...) //nolint:staticcheck // as fakeClients
	return &Clients{Stepwise: sw, Kube: kubefake.NewClientset(), Dynamic: dyn, Mapper: mapper}, sw
}

func retireTrigger(mutate ...func(*v1alpha1.PipelineTrigger)) *v1alpha1.PipelineTrigger {
	trig := &v1alpha1.PipelineTrigger{
		ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: "demo", UID: "trigger-uid"},
		Spec: v1alpha1.PipelineTriggerSpec{
			Resource:           v1alpha1.TriggerResource{APIVersion: "v1", Kind: "Node"},
			Selector:           &v1alpha1.LabelSelector{MatchLabels: map[string]string{"stepwise.dev/retire": "true"}},
			TemplateRef:        v1alpha1.TemplateRef{Name: "retire-node"},
			Params:             map[string]string{"node": "$(object.metadata.name)", "pool": "$(object.metadata.labels['pool'])"},
			ServiceAccountName: "retirer",
			Concurrency:        2,
		},
	}
	for _, m := range mutate {
		m(trig)
	}
	return trig
}

// worker2Pipeline is the trigger's pipeline of worker-2, running: it holds a place.
func worker2Pipeline() *v1alpha1.Pipeline {
	return &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: rules.PipelineName("retire", "worker-2", "uid-2"), Namespace: "demo",
			Labels: map[string]string{
				v1alpha1.LabelTrigger: "retire", v1alpha1.LabelTriggerUID: "trigger-uid", v1alpha1.LabelObjectUID: "uid-2",
			},
			Annotations: map[string]string{v1alpha1.AnnotationObject: "worker-2"}},
		Spec:   v1alpha1.PipelineSpec{TemplateRef: &v1alpha1.TemplateRef{Name: "retire-node"}},
		Status: v1alpha1.PipelineStatus{Phase: v1alpha1.PipelineRunning},
	}
}

// triggerPlan is the table of answerTemplate for a node.
func triggerPlan(n int, node, when string) []string {
	return []string{
		"",
		fmt.Sprintf("%d. %s (%s): Planned, 2 steps, 1 warning", n, node, when),
		"Params: node=" + node + ", pool=blue",
		"STEP     EXECUTOR      SUMMARY",
		"cordon   node.cordon   cordon node " + node,
		"    KIND   NAME       ACTION   NOTE",
		"    Node   " + node + "   change   spec.unschedulable: false → true",
		"    outputs: node=" + node,
		"drain    node.drain    evict 2 pods from " + node,
		"    KIND   NAME                ACTION   NOTE",
		"    Pod    web/web-1           evict    managed by ReplicaSet web-5d4",
		"    Pod    kube-system/proxy   skip     DaemonSet",
		"    ! the disruption budget web/web-pdb allows 0 disruptions: web/web-1 would wait",
	}
}

func TestPlanTrigger(t *testing.T) {
	header := []string{
		"Trigger demo/retire: v1 Node objects, template retire-node, concurrency 2, 1 pipeline unfinished",
		"Started already: worker-2",
	}
	unresolved := "! worker-5 waits, its params do not resolve: params.pool: $(object.metadata.labels['pool']): the object has no field metadata.labels['pool']"
	concat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		name       string
		trig       *v1alpha1.PipelineTrigger
		pipelines  []runtime.Object
		args       []string
		answer     func(p *v1alpha1.Pipeline)
		wantCode   int
		wantOut    []string
		wantNodes  []string // the nodes planned, in order
		wantErr    string
		wantLeft   int
		checkJSON  func(t *testing.T, r triggerReport)
		noPipeline bool
	}{
		{
			name: "order, binding, skip", trig: retireTrigger(), pipelines: []runtime.Object{worker2Pipeline()},
			args: []string{"plan", "--trigger", "retire", "--max", "2"}, answer: answerTemplate,
			wantOut: concat(header,
				[]string{"Waiting: 3 objects, in the order they would start; 1 would start now"},
				triggerPlan(1, "worker-3", "would start now"),
				triggerPlan(2, "worker-1", "would wait"),
				[]string{"", "1 more would wait, not planned (--max 2): worker-4", unresolved}),
			wantNodes: []string{"worker-3", "worker-1"},
		},
		{
			name: "the default --max plans every waiting object; a finished pipeline holds no place",
			trig: retireTrigger(), answer: answerTemplate, args: []string{"plan", "--trigger", "retire"},
			pipelines: []runtime.Object{func() runtime.Object {
				p := worker2Pipeline()
				p.Status.Phase = v1alpha1.PipelineSucceeded
				return p
			}()},
			wantOut: concat([]string{
				"Trigger demo/retire: v1 Node objects, template retire-node, concurrency 2, 0 pipelines unfinished",
				"Started already: worker-2",
				"Waiting: 3 objects, in the order they would start; 2 would start now",
			},
				triggerPlan(1, "worker-3", "would start now"),
				triggerPlan(2, "worker-1", "would start now"),
				triggerPlan(3, "worker-4", "would wait"),
				[]string{unresolved}),
			wantNodes: []string{"worker-3", "worker-1", "worker-4"},
		},
		{
			name: "suspended: nothing starts now", trig: retireTrigger(func(t *v1alpha1.PipelineTrigger) { t.Spec.Suspend = true }),
			pipelines: []runtime.Object{worker2Pipeline()}, answer: answerTemplate,
			args: []string{"plan", "--trigger", "retire", "--max", "1", "-o", "json"},
			checkJSON: func(t *testing.T, r triggerReport) {
				assert.Equal(t, "the trigger is suspended", r.Blocked)
				assert.Equal(t, 0, r.StartNow)
				require.Len(t, r.Objects, 1)
				assert.False(t, r.Objects[0].StartsNow)
			},
			wantNodes: []string{"worker-3"},
		},
		{
			name: "json", trig: retireTrigger(), pipelines: []runtime.Object{worker2Pipeline()}, answer: answerTemplate,
			args: []string{"plan", "--trigger", "retire", "--max", "2", "-o", "json", "--keep"}, wantLeft: 2,
			checkJSON: func(t *testing.T, r triggerReport) {
				assert.Equal(t, "demo/retire", r.Trigger)
				assert.Equal(t, "retire-node", r.Template)
				assert.Equal(t, 2, r.Concurrency)
				assert.Equal(t, 1, r.Unfinished)
				assert.Equal(t, 1, r.StartNow)
				assert.Equal(t, []string{"worker-2"}, r.Started)
				assert.Equal(t, []string{"worker-4"}, r.NotPlanned)
				assert.Equal(t, []unresolvedObject{{Object: "worker-5",
					Error: "params.pool: $(object.metadata.labels['pool']): the object has no field metadata.labels['pool']"}}, r.Unresolved)
				require.Len(t, r.Objects, 2)
				assert.Equal(t, "worker-3", r.Objects[0].Object)
				assert.True(t, r.Objects[0].StartsNow)
				assert.Equal(t, map[string]string{"node": "worker-3", "pool": "blue"}, r.Objects[0].Params)
				assert.Equal(t, v1alpha1.PipelinePlanned, r.Objects[0].Plan.Phase)
				assert.True(t, r.Objects[0].Plan.Kept)
				assert.Equal(t, "cordon node worker-3", r.Objects[0].Plan.Steps[0].Plan.Summary)
				assert.Equal(t, "worker-1", r.Objects[1].Object)
				assert.False(t, r.Objects[1].StartsNow)
			},
			wantNodes: []string{"worker-3", "worker-1"},
			wantErr:   "kept in demo",
		},
		{
			name: "an earlier trigger's pipeline of the same name holds no place", trig: retireTrigger(), answer: answerTemplate,
			pipelines: []runtime.Object{func() runtime.Object {
				p := worker2Pipeline()
				p.Labels[v1alpha1.LabelTriggerUID] = "old-uid"
				return p
			}()},
			args: []string{"plan", "--trigger", "retire", "--max", "1", "-o", "json"},
			checkJSON: func(t *testing.T, r triggerReport) {
				assert.Equal(t, 0, r.Unfinished)
				assert.Empty(t, r.Started)
				assert.Equal(t, 2, r.StartNow)
				assert.Equal(t, []string{"worker-2", "worker-1", "worker-4"}, r.NotPlanned)
			},
			wantNodes: []string{"worker-3"},
		},
		{
			name: "one plan fails: exit 2", trig: retireTrigger(), pipelines: []runtime.Object{worker2Pipeline()},
			args: []string{"plan", "--trigger", "retire", "--max", "2"}, wantCode: ExitPipelineFailed,
			answer: func(p *v1alpha1.Pipeline) {
				if p.Spec.Params["node"] == "worker-1" {
					failDrain(p)
					return
				}
				answerTemplate(p)
			},
			wantNodes: []string{"worker-3", "worker-1"},
		},
		{
			name: "matchFields narrow the objects", args: []string{"plan", "--trigger", "retire", "--max", "1"}, answer: answerTemplate,
			trig: retireTrigger(func(t *v1alpha1.PipelineTrigger) {
				t.Spec.MatchFields = []v1alpha1.FieldRequirement{{Field: "metadata.name", Operator: v1alpha1.FieldNotIn, Values: []string{"worker-3"}}}
			}),
			wantNodes: []string{"worker-2"}, // no pipeline given: worker-2 waits, the oldest but worker-3
		},
		{
			name: "nothing waits", args: []string{"plan", "--trigger", "retire"},
			trig: retireTrigger(func(t *v1alpha1.PipelineTrigger) {
				t.Spec.Selector = &v1alpha1.LabelSelector{MatchLabels: map[string]string{"none": "x"}}
			}),
			wantOut: []string{
				"Trigger demo/retire: v1 Node objects, template retire-node, concurrency 2, 0 pipelines unfinished",
				"Waiting: none",
			},
			noPipeline: true,
		},
		{
			name: "a trigger's params that do not parse", args: []string{"plan", "--trigger", "retire"}, wantCode: ExitError,
			trig:    retireTrigger(func(t *v1alpha1.PipelineTrigger) { t.Spec.Params = map[string]string{"node": "$(object.metadata.)"} }),
			wantErr: "error: trigger demo/retire: params.node: $(object.metadata.): field name expected at 9", noPipeline: true,
		},
		{
			name: "missing template", args: []string{"plan", "--trigger", "retire"}, wantCode: ExitError,
			trig:    retireTrigger(func(t *v1alpha1.PipelineTrigger) { t.Spec.TemplateRef.Name = "gone" }),
			wantErr: `error: get template demo/gone of trigger retire: pipelinetemplates.stepwise.dev "gone" not found`, noPipeline: true,
		},
		{
			name: "unknown kind", args: []string{"plan", "--trigger", "retire"}, wantCode: ExitError,
			trig:    retireTrigger(func(t *v1alpha1.PipelineTrigger) { t.Spec.Resource.Kind = "Widget" }),
			wantErr: "error: find the resource of v1 Widget", noPipeline: true,
		},
		{
			name: "missing trigger", args: []string{"plan", "--trigger", "nope"}, wantCode: ExitError, trig: retireTrigger(),
			wantErr: `error: get trigger demo/nope`, noPipeline: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, sw := triggerClients(t, tt.trig, tt.pipelines...)
			op := newFakeOperator(t, sw, tt.answer)
			code, out, errOut := run(t, c, tt.args...)
			require.Equal(t, tt.wantCode, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			if tt.wantOut != nil {
				assert.Equal(t, tt.wantOut, lines(out))
			}
			if tt.checkJSON != nil {
				var r triggerReport
				require.NoError(t, json.Unmarshal([]byte(out), &r), out)
				tt.checkJSON(t, r)
			}
			if tt.wantErr != "" {
				assert.Contains(t, errOut, tt.wantErr)
			} else {
				assert.Empty(t, errOut)
			}
			if tt.wantCode == ExitPipelineFailed {
				assert.Contains(t, out, "2. worker-1 (would wait): Failed at step drain")
				assert.Contains(t, out, "Failed: StepFailed: step drain cannot be planned: pods is forbidden")
			}
			assert.Len(t, planPipelines(t, sw), tt.wantLeft)
			var nodes []string
			for _, p := range op.createdPipelines() {
				nodes = append(nodes, p.Spec.Params["node"])
				assert.Equal(t, "plan-retire-", p.GenerateName)
				assert.Equal(t, map[string]string{planLabel: "true"}, p.Labels, "no trigger label: the trigger would count it")
				assert.Equal(t, v1alpha1.PipelineSpec{
					TemplateRef: &v1alpha1.TemplateRef{Name: "retire-node"}, ServiceAccountName: "retirer", DryRun: true,
					Params:       map[string]string{"node": p.Spec.Params["node"], "pool": "blue"},
					UpdatePolicy: v1alpha1.UpdateImmutable, // the trigger's default (retireTrigger sets none)
				}, p.Spec)
			}
			if tt.noPipeline {
				assert.Empty(t, nodes)
			} else {
				assert.Equal(t, tt.wantNodes, nodes, "planned in the trigger's order, params bound to each")
			}
		})
	}
}

// TestPlanTriggerPlansTheTriggersPipeline: what plan --trigger plans is the spec of the
// pipeline the trigger would make, update policy included: a trigger without one makes
// Immutable pipelines, so that is what is planned (plan passed the empty policy through).
func TestPlanTriggerPlansTheTriggersPipeline(t *testing.T) {
	tests := []struct {
		name   string
		policy v1alpha1.UpdatePolicy
		want   v1alpha1.UpdatePolicy
	}{
		{name: "no policy: Immutable, as the trigger makes it", want: v1alpha1.UpdateImmutable},
		{name: "Immutable", policy: v1alpha1.UpdateImmutable, want: v1alpha1.UpdateImmutable},
		{name: "Rerun", policy: v1alpha1.UpdateRerun, want: v1alpha1.UpdateRerun},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trig := retireTrigger(func(tr *v1alpha1.PipelineTrigger) { tr.Spec.UpdatePolicy = tt.policy })
			c, sw := triggerClients(t, trig, worker2Pipeline())
			op := newFakeOperator(t, sw, answerTemplate)
			code, out, errOut := run(t, c, "plan", "--trigger", "retire", "--max", "1", "-o", "json")
			require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			created := op.createdPipelines()
			require.Len(t, created, 1)
			assert.Equal(t, tt.want, created[0].Spec.UpdatePolicy)
		})
	}
}
