package rules

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// PipelineFor is the pipeline a trigger makes for an object, with the params bound to it:
// in the trigger's namespace, named after the trigger and the object (PipelineName),
// labelled with both (the trigger by name and by UID), running the trigger's template as
// its ServiceAccount, under its update policy (Immutable when unset, as the schema
// defaults it). Under WhenUnmatched Delete, an object of the trigger's namespace owns its
// pipeline, so that the garbage collector deletes it with the object too (without making
// the object's deletion wait for it). A cluster-scoped object owns nothing: the trigger
// deletes its pipeline itself. It is made with the engine's finalizer, which the engine
// would otherwise patch in before the first step: one write fewer per pipeline.
func PipelineFor(trig *v1alpha1.PipelineTrigger, obj metav1.Object, params map[string]string) *v1alpha1.Pipeline {
	policy := trig.Spec.UpdatePolicy
	if policy == "" {
		policy = v1alpha1.UpdateImmutable
	}
	p := &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{
			Name:      PipelineName(trig.Name, obj.GetName(), obj.GetUID()),
			Namespace: trig.Namespace,
			Labels: map[string]string{
				v1alpha1.LabelTrigger:    LabelValueOf(trig.Name),
				v1alpha1.LabelTriggerUID: string(trig.UID),
				v1alpha1.LabelObjectUID:  string(obj.GetUID()),
			},
			Annotations: map[string]string{v1alpha1.AnnotationObject: ObjectKey(obj.GetNamespace(), obj.GetName())},
			Finalizers:  []string{v1alpha1.Finalizer},
		},
		Spec: v1alpha1.PipelineSpec{
			TemplateRef:        &v1alpha1.TemplateRef{Name: trig.Spec.TemplateRef.Name},
			Params:             params,
			ServiceAccountName: trig.Spec.ServiceAccountName,
			UpdatePolicy:       policy,
			Retention:          trig.Spec.Retention.DeepCopy(),
		},
	}
	if id := ResumeOf(trig); id != "" {
		p.Annotations[v1alpha1.AnnotationResume] = id
	}
	if ref := trig.Spec.NodeBudgetRef; ref != nil {
		p.Labels[v1alpha1.LabelNodeBudget] = NodeBudgetLabelOf(ref.Name)
	}
	// A namespaced kind's objects are in the trigger's namespace; a cluster-scoped one's
	// namespace is empty.
	if obj.GetNamespace() != "" && obj.GetNamespace() == trig.Namespace && trig.Spec.WhenUnmatched == v1alpha1.UnmatchedDelete {
		p.OwnerReferences = []metav1.OwnerReference{{
			APIVersion:         trig.Spec.Resource.APIVersion,
			Kind:               trig.Spec.Resource.Kind,
			Name:               obj.GetName(),
			UID:                obj.GetUID(),
			BlockOwnerDeletion: ptr.To(false),
		}}
	}
	return p
}

// ObjectUIDOf is the UID of the object a trigger's pipeline is for (LabelObjectUID).
func ObjectUIDOf(p *v1alpha1.Pipeline) types.UID {
	return types.UID(p.Labels[v1alpha1.LabelObjectUID])
}

// ByObject maps each object to its pipeline among a trigger's own (OwnershipOf): of two
// for one object, the first by name, so that the answer does not depend on the order of
// pipelines.
func ByObject(pipelines []*v1alpha1.Pipeline) map[types.UID]*v1alpha1.Pipeline {
	out := make(map[types.UID]*v1alpha1.Pipeline, len(pipelines))
	for _, p := range pipelines {
		uid := ObjectUIDOf(p)
		if other, dup := out[uid]; !dup || p.Name < other.Name {
			out[uid] = p
		}
	}
	return out
}
