package cli

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

func TestRerun(t *testing.T) {
	old := pipeline(v1alpha1.StepFailed, failedBuild, func(p *v1alpha1.Pipeline) {
		p.Spec.Suspend = true
		p.Labels = map[string]string{"team": "ops"}
		p.Annotations = map[string]string{v1alpha1.RetryAnnotation: "", "note": "kept"}
	})
	c, sw := fakeClients(old)
	// The fake API does not generate names as the real one does.
	sw.PrependReactor("create", "pipelines", func(action clienttesting.Action) (bool, runtime.Object, error) {
		p := action.(clienttesting.CreateAction).GetObject().(*v1alpha1.Pipeline)
		if p.Name == "" {
			p.Name = p.GenerateName + "x7k2q"
		}
		return false, nil, nil
	})

	code, out, errOut := run(t, c, "rerun", "hello")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, "pipeline.stepwise.dev/hello-x7k2q created, a rerun of hello\n", out)
	got, err := sw.StepwiseV1alpha1().Pipelines("demo").Get(context.Background(), "hello-x7k2q", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, old.Spec.Steps, got.Spec.Steps)
	assert.False(t, got.Spec.Suspend)
	assert.Equal(t, map[string]string{"team": "ops"}, got.Labels)
	assert.Equal(t, map[string]string{"note": "kept"}, got.Annotations)
	assert.Empty(t, got.Status.Steps, "a new run")

	// A rerun of a trigger's pipeline is no trigger's: the trigger would count it, and
	// could delete it, as its own.
	mine := pipeline(v1alpha1.StepFailed, failedBuild, func(p *v1alpha1.Pipeline) {
		p.Name = "retire-n1-abcde"
		p.Labels = map[string]string{v1alpha1.LabelTrigger: "retire", v1alpha1.LabelTriggerUID: "trigger-uid",
			v1alpha1.LabelObjectUID: "uid-n1", "team": "ops"}
	})
	require.NoError(t, sw.Tracker().Add(mine))
	code, _, errOut = run(t, c, "rerun", mine.Name)
	require.Equal(t, ExitOK, code, errOut)
	got, err = sw.StepwiseV1alpha1().Pipelines("demo").Get(context.Background(), mine.Name+"-x7k2q", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"team": "ops"}, got.Labels, "nor its object's (TestRerunDropsWhatATriggerWrote)")

	code, _, errOut = run(t, c, "rerun", "nope")
	assert.Equal(t, ExitError, code)
	assert.Contains(t, errOut, "nope")
}
