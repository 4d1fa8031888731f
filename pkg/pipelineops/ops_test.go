package pipelineops

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/internal/apitest"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
)

// pipeline is the two-step pipeline demo/hello in phase, from its first step on.
func pipeline(phase v1alpha1.PipelinePhase) *v1alpha1.Pipeline {
	return &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "demo", Generation: 1},
		Spec: v1alpha1.PipelineSpec{Steps: []v1alpha1.Step{
			{Name: "prepare", Executor: "test.record"},
			{Name: "build", Executor: "k8s.apply"},
		}},
		Status: v1alpha1.PipelineStatus{ObservedGeneration: 1, Phase: phase, CurrentStep: "build"},
	}
}

// fakeClientset serves objs. NewClientset would need OpenAPI schemas of our types, which
// the generated apply configurations lack, to run patches; the simple tracker applies merge
// patches.
func fakeClientset(objs ...runtime.Object) *fake.Clientset {
	return fake.NewSimpleClientset(objs...) //nolint:staticcheck // see above
}

// patches are the bodies of the patches sent.
func patches(c *fake.Clientset) []string { return apitest.Patches(c) }

// failPatches makes every patch of a pipeline fail.
func failPatches(c *fake.Clientset) {
	c.PrependReactor("patch", "pipelines", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the API server is gone")
	})
}

func TestRetry(t *testing.T) {
	tests := []struct {
		name        string
		p           *v1alpha1.Pipeline
		pipeline    string
		step        string
		breakIt     func(*fake.Clientset)
		wantPatches []string
		wantErr     string
	}{
		{
			name: "from the failed step", p: pipeline(v1alpha1.PipelineFailed), pipeline: "hello",
			wantPatches: []string{`{"metadata":{"annotations":{"stepwise.dev/retry":""}}}`},
		},
		{
			name: "from an earlier step", p: pipeline(v1alpha1.PipelineFailed), pipeline: "hello", step: "prepare",
			wantPatches: []string{`{"metadata":{"annotations":{"stepwise.dev/retry":"prepare"}}}`},
		},
		{
			name: "a step it does not have", p: pipeline(v1alpha1.PipelineFailed), pipeline: "hello", step: "nope",
			wantErr: `pipeline demo/hello has no step "nope"`,
		},
		{
			name: "a pipeline that has not failed", p: pipeline(v1alpha1.PipelineRunning), pipeline: "hello",
			wantErr: "pipeline demo/hello has not failed (phase Running): there is nothing to retry",
		},
		{
			name: "a missing pipeline", p: pipeline(v1alpha1.PipelineFailed), pipeline: "nope",
			wantErr: `get pipeline demo/nope: pipelines.stepwise.dev "nope" not found`,
		},
		{
			name: "the patch fails", p: pipeline(v1alpha1.PipelineFailed), pipeline: "hello", breakIt: failPatches,
			wantErr: "annotate pipeline demo/hello for a retry: the API server is gone",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fakeClientset(tt.p)
			if tt.breakIt != nil {
				tt.breakIt(c)
			}
			got, err := Retry(context.Background(), c, "demo", tt.pipeline, tt.step)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				assert.Nil(t, got)
				if tt.breakIt == nil {
					assert.Empty(t, patches(c), "nothing asked of the operator")
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.p, got, "the pipeline as it was read")
			assert.Equal(t, tt.wantPatches, patches(c))
			now, err := c.StepwiseV1alpha1().Pipelines("demo").Get(context.Background(), "hello", metav1.GetOptions{})
			require.NoError(t, err)
			assert.True(t, now.RetryRequested())
			assert.Equal(t, tt.step, now.Annotations[v1alpha1.RetryAnnotation])
		})
	}
}

func TestSetSuspend(t *testing.T) {
	suspended := pipeline(v1alpha1.PipelineRunning)
	suspended.Spec.Suspend = true
	tests := []struct {
		name      string
		p         *v1alpha1.Pipeline
		pipeline  string
		suspend   bool
		breakIt   func(*fake.Clientset)
		wantPatch string
		wantErr   string
	}{
		{name: "suspend", p: pipeline(v1alpha1.PipelineRunning), pipeline: "hello", suspend: true, wantPatch: `{"spec":{"suspend":true}}`},
		{name: "resume", p: suspended, pipeline: "hello", wantPatch: `{"spec":{"suspend":false}}`},
		{
			name: "a missing pipeline", p: pipeline(v1alpha1.PipelineRunning), pipeline: "nope", suspend: true,
			wantErr: `set spec.suspend=true on pipeline demo/nope: pipelines.stepwise.dev "nope" not found`,
		},
		{
			name: "the patch fails", p: pipeline(v1alpha1.PipelineRunning), pipeline: "hello", breakIt: failPatches,
			wantErr: "set spec.suspend=false on pipeline demo/hello: the API server is gone",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fakeClientset(tt.p)
			if tt.breakIt != nil {
				tt.breakIt(c)
			}
			got, err := SetSuspend(context.Background(), c, "demo", tt.pipeline, tt.suspend)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []string{tt.wantPatch}, patches(c), "one merge patch of the one field")
			assert.Equal(t, tt.suspend, got.Spec.Suspend, "the pipeline as patched")
			assert.Equal(t, tt.p.Spec.Steps, got.Spec.Steps, "nothing else changed")
		})
	}
}
