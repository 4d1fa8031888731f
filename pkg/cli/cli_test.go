package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/internal/apitest"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
)

var t0 = time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }

func ready(status metav1.ConditionStatus, reason, msg string, when time.Duration) []metav1.Condition {
	return []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg, LastTransitionTime: *at(when)}}
}

// pipeline is a three-step pipeline: prepare succeeded in 2s, build is in the given phase,
// publish has not started (and has no status entry yet).
func pipeline(buildPhase v1alpha1.StepPhase, mutate ...func(*v1alpha1.Pipeline)) *v1alpha1.Pipeline {
	p := &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "demo", Generation: 1},
		Spec: v1alpha1.PipelineSpec{Steps: []v1alpha1.Step{
			{Name: "prepare", Executor: "test.record"},
			{Name: "build", Executor: "k8s.apply"},
			{Name: "publish", Executor: "test.noop"},
		}},
		Status: v1alpha1.PipelineStatus{
			ObservedGeneration: 1, Phase: v1alpha1.PipelineRunning, CurrentStep: "build", Progress: "1/3",
			Conditions: ready(metav1.ConditionFalse, "StepRunning", "step build", 3*time.Second),
			Steps: []v1alpha1.StepStatus{
				{Name: "prepare", Executor: "test.record", Phase: v1alpha1.StepSucceeded, Hook: v1alpha1.HookPostCreate,
					Attempts: 1, StartTime: at(0), CompletionTime: at(2 * time.Second), Message: "recorded"},
				{Name: "build", Executor: "k8s.apply", Phase: buildPhase, Hook: v1alpha1.HookCreate,
					Attempts: 3, StartTime: at(2 * time.Second), Message: "applied 2 of 3 objects:\n  waiting"},
			},
		},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func failedBuild(p *v1alpha1.Pipeline) {
	p.Status.Phase = v1alpha1.PipelineFailed
	p.Status.Conditions = ready(metav1.ConditionFalse, "StepFailed", "step build failed: forbidden", 9*time.Second)
	p.Status.Steps[1].Message = "forbidden"
	p.Status.Steps[1].Conditions = ready(metav1.ConditionFalse, "Forbidden", "forbidden", 9*time.Second)
}

// table splits the output's lines into fields, skipping the summary above the blank line.
func tableRows(t *testing.T, out string) [][]string {
	t.Helper()
	_, table, ok := strings.Cut(out, "\n\n")
	require.True(t, ok, "a blank line separates the summary from the table:\n%s", out)
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(table, "\n"), "\n") {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

// threeStepRows is the step table of a pipeline of three steps: prepare succeeded, build's
// row ends with build (its phase, hook, attempts, duration and message's words), and
// publish has not started.
func threeStepRows(build ...string) [][]string {
	return [][]string{
		{"STEP", "EXECUTOR", "PHASE", "HOOK", "ATTEMPTS", "DURATION", "MESSAGE"},
		{"prepare", "test.record", "Succeeded", "PostCreate", "1", "2s", "recorded"},
		append([]string{"build", "k8s.apply"}, build...),
		{"publish", "test.noop", "Pending", "-", "0", "-"},
	}
}

func TestPrintStatus(t *testing.T) {
	tests := []struct {
		name        string
		p           *v1alpha1.Pipeline
		wantSummary []string
		wantRows    [][]string
	}{
		{
			name: "running",
			p:    pipeline(v1alpha1.StepRunning),
			wantSummary: []string{
				"Pipeline:   demo/hello",
				"Phase:      Running (1/3 steps succeeded), step build",
				"Ready:      False",
				"Reason:     StepRunning",
				"Message:    step build",
			},
			// Running: counts until now (t0+12s); the message is one line.
			wantRows: threeStepRows("Running", "Create", "3", "10s", "applied", "2", "of", "3", "objects:", "waiting"),
		},
		{
			name: "failed step counts until it failed",
			p:    pipeline(v1alpha1.StepFailed, failedBuild),
			wantSummary: []string{
				"Phase:      Failed (1/3 steps succeeded), step build",
				"Reason:     StepFailed",
				"Message:    step build failed: forbidden",
			},
			// The step's own reason, which the pipeline's (StepFailed) does not tell.
			wantRows: threeStepRows("Failed", "Create", "3", "7s", "Forbidden:", "forbidden"),
		},
		{
			name: "failed step with no message",
			p: pipeline(v1alpha1.StepFailed, failedBuild, func(p *v1alpha1.Pipeline) {
				p.Status.Steps[1].Message = ""
				p.Status.Steps[1].Conditions = ready(metav1.ConditionFalse, "TicketRejected", "", 9*time.Second)
			}),
			wantRows: threeStepRows("Failed", "Create", "3", "7s", "TicketRejected"),
		},
		{
			name: "failed step with no condition",
			p: pipeline(v1alpha1.StepFailed, failedBuild, func(p *v1alpha1.Pipeline) {
				p.Status.Steps[1].Conditions = nil
			}),
			wantRows: threeStepRows("Failed", "Create", "3", "-", "forbidden"),
		},
		{
			name: "a template's pipeline shows the template's steps, as the run took them",
			p: pipeline(v1alpha1.StepRunning, func(p *v1alpha1.Pipeline) {
				p.Status.Template = &v1alpha1.TemplateSnapshot{Name: "t", Steps: p.Spec.Steps}
				p.Spec.TemplateRef, p.Spec.Steps = &v1alpha1.TemplateRef{Name: "t"}, nil
			}),
			wantRows: threeStepRows("Running", "Create", "3", "10s", "applied", "2", "of", "3", "objects:", "waiting"),
		},
		{
			name: "not looked at yet, suspended, retry asked, newer spec",
			p: &v1alpha1.Pipeline{
				ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: "demo", Generation: 2,
					Annotations: map[string]string{"stepwise.dev/retry": "build"}},
				Spec: v1alpha1.PipelineSpec{Suspend: true, Steps: []v1alpha1.Step{{Name: "only", Executor: "test.noop"}}},
			},
			wantSummary: []string{
				"Pipeline:   demo/new",
				"Phase:      Pending",
				"Ready:      Unknown",
				"Message:    the operator has not looked at the pipeline yet",
				`Note:       suspended (spec.suspend: true); retry requested (stepwise.dev/retry="build"); status is of generation 0, spec is at 2`,
			},
			wantRows: [][]string{
				{"STEP", "EXECUTOR", "PHASE", "HOOK", "ATTEMPTS", "DURATION", "MESSAGE"},
				{"only", "test.noop", "Pending", "-", "0", "-"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, PrintStatus(&buf, tt.p, t0.Add(12*time.Second)))
			summary, _, _ := strings.Cut(buf.String(), "\n\n")
			for _, line := range tt.wantSummary {
				assert.Contains(t, strings.Split(summary, "\n"), line, "summary:\n%s", summary)
			}
			assert.Equal(t, tt.wantRows, tableRows(t, buf.String()))
		})
	}
}

// run executes kubectl-stepwise against fake clients and returns its exit code and output.
func run(t *testing.T, c *Clients, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	code := Execute(context.Background(), append(args, "--namespace", "demo"), streams, func() (*Clients, error) { return c, nil })
	return code, out.String(), errOut.String()
}

func fakeClients(objs ...runtime.Object) (*Clients, *fake.Clientset) {
	// NewClientset would need OpenAPI schemas of our types, which the generated apply
	// configurations lack, to run patches; the simple tracker applies merge patches.
	sw := fake.NewSimpleClientset(objs...) //nolint:staticcheck // see above
	return &Clients{Stepwise: sw, Kube: kubefake.NewClientset()}, sw
}

func TestStatusCommand(t *testing.T) {
	tests := []struct {
		name     string
		p        *v1alpha1.Pipeline
		args     []string
		wantCode int
		check    func(t *testing.T, out string)
	}{
		{
			name: "table", p: pipeline(v1alpha1.StepRunning), args: []string{"status", "hello"}, wantCode: ExitOK,
			check: func(t *testing.T, out string) { assert.Len(t, tableRows(t, out), 4) },
		},
		{
			name: "failed exits 2", p: pipeline(v1alpha1.StepFailed, failedBuild), args: []string{"status", "hello"}, wantCode: ExitPipelineFailed,
			check: func(t *testing.T, out string) {
				assert.Contains(t, out, "StepFailed")
				assert.Contains(t, out, "Forbidden: forbidden", "the failed step's own reason")
			},
		},
		{
			name: "blocked teardown exits 2",
			p: pipeline(v1alpha1.StepFailed, func(p *v1alpha1.Pipeline) {
				p.Status.Phase = v1alpha1.PipelineDeleting
				p.Status.Conditions = ready(metav1.ConditionFalse, "TeardownFailed", "teardown of step build is blocked", time.Second)
			}),
			args: []string{"status", "hello"}, wantCode: ExitPipelineFailed,
		},
		{
			name: "json", p: pipeline(v1alpha1.StepRunning), args: []string{"status", "hello", "-o", "json"}, wantCode: ExitOK,
			check: func(t *testing.T, out string) {
				var got v1alpha1.Pipeline
				require.NoError(t, json.Unmarshal([]byte(out), &got), out)
				assert.Equal(t, "stepwise.dev/v1alpha1", got.APIVersion)
				assert.Equal(t, "Pipeline", got.Kind)
				want, err := json.Marshal(pipeline(v1alpha1.StepRunning).Status)
				require.NoError(t, err)
				have, err := json.Marshal(got.Status)
				require.NoError(t, err)
				assert.JSONEq(t, string(want), string(have), "the whole status")
			},
		},
		{
			name: "yaml of a failed pipeline exits 2", p: pipeline(v1alpha1.StepFailed, failedBuild),
			args: []string{"status", "hello", "-o", "yaml"}, wantCode: ExitPipelineFailed,
			check: func(t *testing.T, out string) {
				var got v1alpha1.Pipeline
				require.NoError(t, yaml.Unmarshal([]byte(out), &got), out)
				assert.Equal(t, v1alpha1.PipelineFailed, got.Status.Phase)
			},
		},
		{name: "unknown output", p: pipeline(v1alpha1.StepRunning), args: []string{"status", "hello", "-o", "wide"}, wantCode: ExitError},
		{name: "missing pipeline", p: pipeline(v1alpha1.StepRunning), args: []string{"status", "nope"}, wantCode: ExitError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := fakeClients(tt.p)
			code, out, errOut := run(t, c, tt.args...)
			assert.Equal(t, tt.wantCode, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			if tt.check != nil {
				tt.check(t, out)
			}
		})
	}
}

// patches returns the bodies of the patches sent.
func patches(c *fake.Clientset) []string { return apitest.Patches(c) }

func TestRetrySuspendResume(t *testing.T) {
	tests := []struct {
		name        string
		p           *v1alpha1.Pipeline
		args        []string
		wantCode    int
		wantPatches []string
		wantOut     string
		check       func(t *testing.T, p *v1alpha1.Pipeline)
	}{
		{
			name: "retry the failed step", p: pipeline(v1alpha1.StepFailed, failedBuild), args: []string{"retry", "hello"},
			wantPatches: []string{`{"metadata":{"annotations":{"stepwise.dev/retry":""}}}`},
			wantOut:     "pipeline.stepwise.dev/hello retry requested from its failed step build\n",
			check: func(t *testing.T, p *v1alpha1.Pipeline) {
				assert.Contains(t, p.Annotations, "stepwise.dev/retry")
			},
		},
		{
			name: "retry from a step", p: pipeline(v1alpha1.StepFailed, failedBuild), args: []string{"retry", "hello", "--step", "prepare"},
			wantPatches: []string{`{"metadata":{"annotations":{"stepwise.dev/retry":"prepare"}}}`},
			wantOut:     "pipeline.stepwise.dev/hello retry requested from step prepare\n",
			check: func(t *testing.T, p *v1alpha1.Pipeline) {
				assert.Equal(t, "prepare", p.Annotations["stepwise.dev/retry"])
			},
		},
		{
			name: "retry of an unknown step is refused", p: pipeline(v1alpha1.StepFailed, failedBuild),
			args: []string{"retry", "hello", "--step", "nope"}, wantCode: ExitError,
		},
		{
			name: "retry of a pipeline that has not failed is refused", p: pipeline(v1alpha1.StepRunning),
			args: []string{"retry", "hello"}, wantCode: ExitError,
		},
		{
			name: "suspend", p: pipeline(v1alpha1.StepRunning), args: []string{"suspend", "hello"},
			wantPatches: []string{`{"spec":{"suspend":true}}`}, wantOut: "pipeline.stepwise.dev/hello suspended\n",
			check: func(t *testing.T, p *v1alpha1.Pipeline) { assert.True(t, p.Spec.Suspend) },
		},
		{
			name: "resume", p: pipeline(v1alpha1.StepRunning, func(p *v1alpha1.Pipeline) { p.Spec.Suspend = true }),
			args: []string{"resume", "hello"}, wantPatches: []string{`{"spec":{"suspend":false}}`},
			wantOut: "pipeline.stepwise.dev/hello resumed\n",
			check:   func(t *testing.T, p *v1alpha1.Pipeline) { assert.False(t, p.Spec.Suspend) },
		},
		{name: "suspend of a missing pipeline", p: pipeline(v1alpha1.StepRunning), args: []string{"suspend", "nope"}, wantCode: ExitError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, sw := fakeClients(tt.p)
			code, out, errOut := run(t, c, tt.args...)
			require.Equal(t, tt.wantCode, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			got, err := sw.StepwiseV1alpha1().Pipelines("demo").Get(context.Background(), "hello", metav1.GetOptions{})
			require.NoError(t, err)
			if tt.wantCode != ExitOK {
				assert.Equal(t, tt.p, got, "a command that fails changes nothing")
				assert.NotEmpty(t, errOut)
				return
			}
			assert.Equal(t, tt.wantOut, out)
			assert.Equal(t, tt.wantPatches, patches(sw))
			tt.check(t, got)
		})
	}
}
