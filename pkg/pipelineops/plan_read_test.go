package pipelineops

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

func TestSettled(t *testing.T) {
	tests := []struct {
		name     string
		mutate   func(p *v1alpha1.Pipeline)
		wantDone bool
	}{
		{name: "the status of the current spec", mutate: func(*v1alpha1.Pipeline) {}, wantDone: true},
		{name: "a spec the operator has not seen yet", mutate: func(p *v1alpha1.Pipeline) { p.Generation = 2 }},
		{name: "a retry not picked up yet", mutate: func(p *v1alpha1.Pipeline) {
			p.Annotations = map[string]string{v1alpha1.RetryAnnotation: ""}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pipeline(v1alpha1.PipelineFailed)
			tt.mutate(p)
			assert.Equal(t, tt.wantDone, Settled(p))
		})
	}
}

func TestPlannedSteps(t *testing.T) {
	cordon := v1alpha1.StepStatus{Name: "cordon", Executor: "node.cordon@v2", Phase: v1alpha1.StepPlanned}
	drain := v1alpha1.StepStatus{Name: "drain", Phase: v1alpha1.StepFailed}
	specSteps := []v1alpha1.Step{{Name: "cordon", Executor: "node.cordon"}, {Name: "drain", Executor: "node.drain"}, {Name: "delete", Executor: "node.delete"}}
	tests := []struct {
		name string
		p    *v1alpha1.Pipeline
		want []PlannedStep
	}{
		{
			name: "the spec's steps, with their statuses; the executor the status names",
			p: &v1alpha1.Pipeline{
				Spec:   v1alpha1.PipelineSpec{Steps: specSteps},
				Status: v1alpha1.PipelineStatus{Steps: []v1alpha1.StepStatus{cordon, drain}},
			},
			want: []PlannedStep{
				{Name: "cordon", Executor: "node.cordon@v2", Status: &cordon},
				{Name: "drain", Executor: "node.drain", Status: &drain},
				{Name: "delete", Executor: "node.delete"},
			},
		},
		{
			name: "the template's steps, as the operator took them",
			p: &v1alpha1.Pipeline{
				Spec:   v1alpha1.PipelineSpec{TemplateRef: &v1alpha1.TemplateRef{Name: "retire-node"}},
				Status: v1alpha1.PipelineStatus{Template: &v1alpha1.TemplateSnapshot{Name: "retire-node", Steps: specSteps[:1]}},
			},
			want: []PlannedStep{{Name: "cordon", Executor: "node.cordon"}},
		},
		{
			name: "no template taken: the status's steps",
			p: &v1alpha1.Pipeline{
				Spec:   v1alpha1.PipelineSpec{TemplateRef: &v1alpha1.TemplateRef{Name: "retire-node"}},
				Status: v1alpha1.PipelineStatus{Steps: []v1alpha1.StepStatus{cordon}},
			},
			want: []PlannedStep{{Name: "cordon", Executor: "node.cordon@v2", Status: &cordon}},
		},
		{
			name: "nothing yet",
			p:    &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "plan-x"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, PlannedSteps(tt.p))
		})
	}
}
