package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

func ptr[T any](v T) *T { return &v }

func retireTemplate() *v1alpha1.PipelineTemplate {
	return &v1alpha1.PipelineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: "ns", UID: "tpl-uid", Generation: 4},
		Spec: v1alpha1.PipelineTemplateSpec{
			Params: []v1alpha1.TemplateParam{
				{Name: "node", Required: true},
				{Name: "timeout", Default: ptr("10m")},
			},
			Steps: []v1alpha1.Step{
				{Name: "cordon", Executor: "test.record", With: map[string]string{"node": "$(params.node)"}},
				{Name: "drain", Executor: "test.record", With: map[string]string{"node": "$(params.node)", "timeout": "$(params.timeout)"}},
			},
		},
	}
}

func templatePipeline(params map[string]string) *v1alpha1.Pipeline {
	p := newPipeline()
	p.Spec.Steps = nil
	p.Spec.TemplateRef = &v1alpha1.TemplateRef{Name: "retire"}
	p.Spec.Params = params
	return p
}

func (f *fixture) addTemplate(t *v1alpha1.PipelineTemplate) {
	f.t.Helper()
	require.NoError(f.t, f.templates.Add(t))
}

func paramsOf(f *fixture, step string) map[string]string {
	for _, r := range f.exec.requests {
		if r.Step == step {
			return r.Params
		}
	}
	return nil
}

func TestPipelineRunsItsTemplate(t *testing.T) {
	f := newFixture(t, templatePipeline(map[string]string{"node": "n1"}))
	f.addTemplate(retireTemplate())
	f.syncUntilIdle("p")

	got := f.get("p")
	assert.Equal(t, v1alpha1.PipelineSucceeded, got.Status.Phase)
	assert.Equal(t, map[string]string{"node": "n1", "timeout": "10m"}, paramsOf(f, "drain"), "the default filled in")
	require.NotNil(t, got.Status.Template)
	assert.Equal(t, "retire", got.Status.Template.Name)
	assert.Equal(t, "tpl-uid", got.Status.Template.UID)
	assert.Equal(t, int64(4), got.Status.Template.Generation)
	assert.Len(t, got.Status.Steps, 2)
}

// TestARunKeepsTheTemplateItStartedFrom: editing or deleting the template changes nothing
// of a run that started; teardown runs what was created.
func TestARunKeepsTheTemplateItStartedFrom(t *testing.T) {
	f := newFixture(t, templatePipeline(map[string]string{"node": "n1"}))
	f.addTemplate(retireTemplate())
	f.exec.on("drain", v1alpha1.HookCreate, waitFor(60e9, "draining"))
	f.syncUntilIdle("p")

	edited := retireTemplate()
	edited.Spec.Steps = []v1alpha1.Step{{Name: "other", Executor: "test.record"}}
	require.NoError(t, f.templates.Update(edited))
	f.exec.on("drain", v1alpha1.HookCreate, done)
	f.clock.Step(61e9)
	f.syncUntilIdle("p")
	got := f.get("p")
	assert.Equal(t, v1alpha1.PipelineSucceeded, got.Status.Phase)
	assert.Equal(t, []string{"cordon", "drain"}, []string{got.Status.Steps[0].Name, got.Status.Steps[1].Name})

	require.NoError(t, f.templates.Delete(edited))
	f.exec.reset()
	f.delete("p")
	f.syncUntilIdle("p")
	assert.Equal(t, []string{
		"drain/PreDelete#1", "drain/Delete#1", "drain/PostDelete#1",
		"cordon/PreDelete#1", "cordon/Delete#1", "cordon/PostDelete#1",
	}, f.exec.Calls())
}

// TestMissingTemplateWaitsThenStarts: a pipeline whose template does not exist yet waits
// with a reason, and starts once the template appears.
func TestMissingTemplateWaitsThenStarts(t *testing.T) {
	f := newFixture(t, templatePipeline(map[string]string{"node": "n1"}))
	f.syncUntilIdle("p")
	got := f.get("p")
	assert.Equal(t, v1alpha1.PipelinePending, got.Status.Phase)
	assert.Equal(t, v1alpha1.ReasonTemplateNotFound, readyCondition(got.Status.Conditions).Reason)
	assert.Contains(t, readyCondition(got.Status.Conditions).Message, "starts once it does")
	assert.Empty(t, f.exec.Calls())

	tpl := retireTemplate()
	f.addTemplate(tpl)
	f.c.enqueueUsersOf(tpl)
	assert.Equal(t, 1, f.c.queue.Len(), "the waiting pipeline is enqueued")
	f.syncUntilIdle("p")
	assert.Equal(t, v1alpha1.PipelineSucceeded, f.get("p").Status.Phase)
}

func TestTemplateParameterErrors(t *testing.T) {
	tests := []struct {
		name    string
		params  map[string]string
		wantErr string
	}{
		{name: "required missing", params: map[string]string{"timeout": "1m"}, wantErr: "required parameters not given: node"},
		{name: "unknown", params: map[string]string{"node": "n1", "nodes": "n2"}, wantErr: "parameters the template does not declare: nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, templatePipeline(tt.params))
			f.addTemplate(retireTemplate())
			f.syncUntilIdle("p")
			got := f.get("p")
			assert.Equal(t, v1alpha1.PipelineFailed, got.Status.Phase)
			ready := readyCondition(got.Status.Conditions)
			assert.Equal(t, v1alpha1.ReasonInvalidParameters, ready.Reason)
			assert.Contains(t, ready.Message, tt.wantErr)
			assert.Empty(t, f.exec.Calls())
		})
	}
}

// TestTemplateTooLargeToKeepFailsBeforeAnyHook: the status keeps a copy of the template
// and the params; when that copy would make the pipeline too large to store, the pipeline
// fails at once, before any hook, instead of running hooks whose status can never be
// written.
func TestTemplateTooLargeToKeepFailsBeforeAnyHook(t *testing.T) {
	big := retireTemplate()
	for i := range 20 {
		big.Spec.Steps[0].With[fmt.Sprintf("pad%d", i)] = strings.Repeat("x", 64<<10)
	}
	f := newFixture(t, templatePipeline(map[string]string{"node": "n1"}))
	f.addTemplate(big)
	f.syncUntilIdle("p")
	got := f.get("p")
	assert.Equal(t, v1alpha1.PipelineFailed, got.Status.Phase)
	ready := readyCondition(got.Status.Conditions)
	assert.Equal(t, v1alpha1.ReasonTemplateTooLarge, ready.Reason)
	assert.Contains(t, ready.Message, "template retire")
	assert.Nil(t, got.Status.Template)
	assert.Empty(t, f.exec.Calls())
}

// TestOnFailureTeardownUndoesWhatRan: a step that fails for good under onFailure Teardown
// has the steps that ran torn down at once, last first; the pipeline ends Failed with the
// reason; a retry starts over from the first step.
func TestOnFailureTeardownUndoesWhatRan(t *testing.T) {
	p := newPipeline(stepsOf("cordon", "drain", "terminate")...)
	p.Spec.OnFailure = v1alpha1.FailureTeardown
	f := newFixture(t, p)
	f.exec.on("drain", v1alpha1.HookCreate, failWith(contract.Permanent("PodDisruptionBudget", errBoom)))
	f.syncUntilIdle("p")

	assert.Equal(t, []string{
		"cordon/PreCreate#1", "cordon/Create#1", "cordon/PostCreate#1",
		"drain/PreCreate#1", "drain/Create#1",
		"drain/PreDelete#1", "drain/Delete#1", "drain/PostDelete#1",
		"cordon/PreDelete#1", "cordon/Delete#1", "cordon/PostDelete#1",
	}, f.exec.Calls())
	got := f.get("p")
	assert.Equal(t, v1alpha1.PipelineFailed, got.Status.Phase)
	ready := readyCondition(got.Status.Conditions)
	assert.Equal(t, v1alpha1.ReasonTornDownAfterFailure, ready.Reason)
	assert.Contains(t, ready.Message, "step drain failed")
	assert.Contains(t, ready.Message, "boom")
	assert.Contains(t, f.events(), "Normal "+v1alpha1.ReasonTornDownAfterFailure)
	require.NotNil(t, got.Status.Failure, "the state is a typed record, not only a condition's reason")
	assert.Equal(t, "drain", got.Status.Failure.Step)
	assert.Equal(t, v1alpha1.FailureTornDown, got.Status.Failure.Teardown)
	assert.Contains(t, got.Status.Failure.Message, "boom")

	f.exec.reset()
	f.exec.on("drain", v1alpha1.HookCreate, func(context.Context, *executor.Request) (contract.Result, error) { return contract.Done(""), nil })
	f.update("p", func(p *v1alpha1.Pipeline) { p.Annotations = map[string]string{v1alpha1.RetryAnnotation: ""} })
	f.syncUntilIdle("p")
	assert.Equal(t, v1alpha1.PipelineSucceeded, f.get("p").Status.Phase)
	assert.Nil(t, f.get("p").Status.Failure, "a retry starts over")
	assert.Equal(t, "cordon/PreCreate#1", f.exec.Calls()[0], "from the first step")

	f.exec.reset()
	f.delete("p")
	f.syncUntilIdle("p")
	assert.Len(t, f.exec.Calls(), 9, "the new run is torn down")
}
