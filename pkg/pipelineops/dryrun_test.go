package pipelineops

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

func TestDryRunOf(t *testing.T) {
	steps := []v1alpha1.Step{{Name: "cordon", Executor: "node.cordon", With: map[string]string{"node": "worker-3"}}}
	tests := []struct {
		name string
		p    *v1alpha1.Pipeline
		as   string
		// wantGenerateName and wantAnnotations are the dry run's.
		wantGenerateName string
		wantAnnotations  map[string]string
	}{
		{
			name: "a pipeline's: none of its metadata, planned as it",
			p: &v1alpha1.Pipeline{
				ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: "prod",
					Labels:          map[string]string{v1alpha1.LabelTrigger: "someone-else"},
					Annotations:     map[string]string{v1alpha1.RetryAnnotation: ""},
					OwnerReferences: []metav1.OwnerReference{{Name: "owner"}}},
				Spec: v1alpha1.PipelineSpec{Steps: steps, Suspend: true},
			},
			as: "retire", wantGenerateName: "plan-retire-", wantAnnotations: map[string]string{v1alpha1.PlanAsAnnotation: "retire"},
		},
		{
			name: "a manifest with a generateName only: planned as no pipeline",
			p:    &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{GenerateName: "retire-"}, Spec: v1alpha1.PipelineSpec{Steps: steps}},
			as:   "retire", wantGenerateName: "plan-retire-",
		},
		{
			name: "a long name is cut to leave the API server room",
			p:    &v1alpha1.Pipeline{}, as: strings.Repeat("a", 60), wantGenerateName: "plan-" + strings.Repeat("a", 52) + "-",
		},
		{name: "a short one is not", p: &v1alpha1.Pipeline{}, as: "ab", wantGenerateName: "plan-ab-"},
		{
			name: "a cut name ends with a letter or digit",
			p:    &v1alpha1.Pipeline{}, as: strings.Repeat("a", 51) + ".b", wantGenerateName: "plan-" + strings.Repeat("a", 51) + "-",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.p.DeepCopy()
			got := DryRunOf(tt.p, tt.as)
			assert.Equal(t, before, tt.p, "p is left as it is")
			assert.LessOrEqual(t, len(got.GenerateName)+5, 63, "the API server's name stays a label")
			assert.Equal(t, metav1.ObjectMeta{
				GenerateName: tt.wantGenerateName,
				Labels:       map[string]string{PlanLabel: "true"},
				Annotations:  tt.wantAnnotations,
			}, got.ObjectMeta)
			want := *tt.p.Spec.DeepCopy()
			want.DryRun, want.Suspend = true, false
			assert.Equal(t, want, got.Spec, "p's spec, a dry run that runs now")
		})
	}
}

func TestTemplateDryRun(t *testing.T) {
	template := &v1alpha1.PipelineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "retire-node", Namespace: "demo"},
		Spec:       v1alpha1.PipelineTemplateSpec{Steps: []v1alpha1.Step{{Name: "cordon", Executor: "node.cordon"}}},
	}
	tests := []struct {
		name     string
		template string
		want     *v1alpha1.Pipeline
		wantErr  string
	}{
		{
			name: "as run creates it", template: "retire-node",
			want: &v1alpha1.Pipeline{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "plan-retire-node-", Labels: map[string]string{PlanLabel: "true"}},
				Spec: v1alpha1.PipelineSpec{
					TemplateRef: &v1alpha1.TemplateRef{Name: "retire-node"}, Params: map[string]string{"node": "worker-7"},
					ServiceAccountName: "retirer", DryRun: true,
				},
			},
		},
		{
			name: "a template that does not exist: a plan would wait for it", template: "nope",
			wantErr: `get template demo/nope: pipelinetemplates.stepwise.dev "nope" not found`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fakeClientset(template)
			got, err := TemplateDryRun(context.Background(), c, "demo", tt.template, map[string]string{"node": "worker-7"}, "retirer")
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
