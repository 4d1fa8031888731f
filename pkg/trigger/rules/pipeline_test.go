package rules

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
)

func TestPipelineFor(t *testing.T) {
	params := map[string]string{"node": "n1"}
	tests := []struct {
		name       string
		change     func(*v1alpha1.PipelineTrigger)
		obj        metav1.Object
		wantPolicy v1alpha1.UpdatePolicy
		wantOwner  bool
	}{
		{name: "a node", obj: triggertest.Node("n1", 0, nil), wantPolicy: v1alpha1.UpdateImmutable},
		{name: "no update policy: Immutable, as the schema defaults it",
			change: func(tr *v1alpha1.PipelineTrigger) { tr.Spec.UpdatePolicy = "" },
			obj:    triggertest.Node("n1", 0, nil), wantPolicy: v1alpha1.UpdateImmutable},
		{name: "Rerun", change: func(tr *v1alpha1.PipelineTrigger) { tr.Spec.UpdatePolicy = v1alpha1.UpdateRerun },
			obj: triggertest.Node("n1", 0, nil), wantPolicy: v1alpha1.UpdateRerun},
		{name: "a cluster-scoped object under Delete owns nothing",
			change: func(tr *v1alpha1.PipelineTrigger) { tr.Spec.WhenUnmatched = v1alpha1.UnmatchedDelete },
			obj:    triggertest.Node("n1", 0, nil), wantPolicy: v1alpha1.UpdateImmutable},
		{name: "an object of the trigger's namespace under Keep owns nothing",
			obj: triggertest.WebApp("ns", "n1", 0, nil), wantPolicy: v1alpha1.UpdateImmutable},
		{name: "an object of the trigger's namespace under Delete owns its pipeline",
			change: func(tr *v1alpha1.PipelineTrigger) {
				tr.Spec.WhenUnmatched = v1alpha1.UnmatchedDelete
				tr.Spec.Resource = v1alpha1.TriggerResource{APIVersion: "demo.stepwise.dev/v1alpha1", Kind: "WebApp"}
			},
			obj: triggertest.WebApp("ns", "n1", 0, nil), wantPolicy: v1alpha1.UpdateImmutable, wantOwner: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trig := triggertest.Trigger()
			if tt.change != nil {
				tt.change(trig)
			}
			p := PipelineFor(trig, tt.obj, params)
			assert.Equal(t, PipelineName("retire", "n1", tt.obj.GetUID()), p.Name)
			assert.Equal(t, "ns", p.Namespace)
			assert.Equal(t, map[string]string{
				v1alpha1.LabelTrigger: "retire", v1alpha1.LabelTriggerUID: "trigger-uid", v1alpha1.LabelObjectUID: string(tt.obj.GetUID()),
			}, p.Labels)
			assert.Equal(t, map[string]string{v1alpha1.AnnotationObject: ObjectKey(tt.obj.GetNamespace(), "n1")}, p.Annotations)
			assert.Equal(t, []string{v1alpha1.Finalizer}, p.Finalizers, "made with the finalizer: the engine need not patch it in")
			assert.Equal(t, v1alpha1.PipelineSpec{
				TemplateRef: &v1alpha1.TemplateRef{Name: "retire-node"}, Params: params, ServiceAccountName: "retirer",
				UpdatePolicy: tt.wantPolicy,
			}, p.Spec)
			if !tt.wantOwner {
				assert.Empty(t, p.OwnerReferences)
				return
			}
			assert.Equal(t, []metav1.OwnerReference{{
				APIVersion: "demo.stepwise.dev/v1alpha1", Kind: "WebApp", Name: "n1", UID: tt.obj.GetUID(), BlockOwnerDeletion: ptr.To(false),
			}}, p.OwnerReferences)
			assert.Equal(t, Owned, OwnershipOf(trig, p, triggertest.OperatorUser), "the trigger owns the pipeline it makes")
		})
	}
}

// TestByObject: each object's pipeline, the first by name of several.
func TestByObject(t *testing.T) {
	pipeline := func(name, object string) *v1alpha1.Pipeline {
		return &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelObjectUID: object}}}
	}
	a, b1, b2 := pipeline("a", "uid-a"), pipeline("b-1", "uid-b"), pipeline("b-2", "uid-b")
	tests := []struct {
		name      string
		pipelines []*v1alpha1.Pipeline
		want      map[types.UID]*v1alpha1.Pipeline
	}{
		{name: "none", want: map[types.UID]*v1alpha1.Pipeline{}},
		{name: "one each", pipelines: []*v1alpha1.Pipeline{a, b1}, want: map[types.UID]*v1alpha1.Pipeline{"uid-a": a, "uid-b": b1}},
		{name: "two for one, in order", pipelines: []*v1alpha1.Pipeline{b1, b2}, want: map[types.UID]*v1alpha1.Pipeline{"uid-b": b1}},
		{name: "two for one, in reverse", pipelines: []*v1alpha1.Pipeline{b2, b1}, want: map[types.UID]*v1alpha1.Pipeline{"uid-b": b1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ByObject(tt.pipelines))
		})
	}
}
