package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// TestRerunDropsWhatATriggerWrote: a rerun is a person's pipeline, no trigger's: it keeps
// none of the labels and annotations that tie a pipeline to a trigger, an object or a
// NodeBudget (a copy labelled with a budget would hold a place in it), nor the engine's
// requests; it keeps the others.
func TestRerunDropsWhatATriggerWrote(t *testing.T) {
	trig := &v1alpha1.PipelineTrigger{
		ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: "ops", UID: "uid-trigger"},
		Spec: v1alpha1.PipelineTriggerSpec{
			Resource:      v1alpha1.TriggerResource{APIVersion: "v1", Kind: "Node"},
			TemplateRef:   v1alpha1.TemplateRef{Name: "retire-node"},
			NodeBudgetRef: &v1alpha1.NodeBudgetRef{Name: "fleet"},
			Resume:        &v1alpha1.TriggerResume{ID: "r1", By: "alice"},
		},
	}
	node := &unstructured.Unstructured{}
	node.SetName("n1")
	node.SetUID(types.UID("uid-n1"))
	// Every label and annotation a trigger writes, as it writes them.
	ofTrigger := rules.PipelineFor(trig, node, map[string]string{"node": "n1"})

	for _, tc := range []struct {
		name            string
		labels          map[string]string
		annotations     map[string]string
		wantLabels      map[string]string
		wantAnnotations map[string]string
	}{
		{
			name:            "a trigger's pipeline",
			labels:          withEntry(ofTrigger.Labels, "team", "ops"),
			annotations:     withEntry(ofTrigger.Annotations, "note", "kept"),
			wantLabels:      map[string]string{"team": "ops"},
			wantAnnotations: map[string]string{"note": "kept"},
		},
		{
			name: "a person's pipeline that copied a trigger's labels by hand",
			labels: map[string]string{v1alpha1.LabelNodeBudget: "fleet", v1alpha1.LabelObjectUID: "uid-n1",
				v1alpha1.LabelTrigger: "retire", "team": "ops"},
			annotations: map[string]string{v1alpha1.AnnotationObject: "n1", v1alpha1.AnnotationResume: "r1",
				v1alpha1.RetryAnnotation: "", v1alpha1.TeardownPolicyAnnotation: "Keep",
				"kubectl.kubernetes.io/last-applied-configuration": "{}"},
			wantLabels: map[string]string{"team": "ops"},
		},
		{
			name:            "a person's pipeline",
			labels:          map[string]string{"team": "ops"},
			annotations:     map[string]string{"note": "kept"},
			wantLabels:      map[string]string{"team": "ops"},
			wantAnnotations: map[string]string{"note": "kept"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ofTrigger.DeepCopy()
			p.Labels, p.Annotations = tc.labels, tc.annotations
			got := rerunOf(p)
			assert.Equal(t, tc.wantLabels, emptyAsNil(got.Labels))
			assert.Equal(t, tc.wantAnnotations, emptyAsNil(got.Annotations))
			assert.Empty(t, got.OwnerReferences)
		})
	}
}

// withEntry is a copy of m with key set to value.
func withEntry(m map[string]string, key, value string) map[string]string {
	out := map[string]string{key: value}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func emptyAsNil(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}
