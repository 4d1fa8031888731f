package rules

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// The objects of these tests are those of pkg/trigger's, cut to what a rule reads.

var start = time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)

var (
	pipelinesGVR = v1alpha1.SchemeGroupVersion.WithResource("pipelines")
	webappsGVR   = schema.GroupVersionResource{Group: "demo.stepwise.dev", Version: "v1alpha1", Resource: "webapps"}
)

// retiring are the labels newTrigger selects.
var retiring = map[string]string{"stepwise.dev/retire": "true"}

// newNode is a Node created at start plus age, with labels.
func newNode(name string, age time.Duration, labels map[string]string) *unstructured.Unstructured {
	n := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"providerID": "cloud://" + name},
	}}
	n.SetUID(types.UID("uid-" + name))
	n.SetLabels(labels)
	n.SetCreationTimestamp(metav1.NewTime(start.Add(age)))
	return n
}

// newWebApp is a WebApp of namespace ns.
func newWebApp(ns, name string, age time.Duration, labels map[string]string) *unstructured.Unstructured {
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "demo.stepwise.dev/v1alpha1", "kind": "WebApp",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"image": "web:1", "replicas": int64(2)},
	}}
	w.SetUID(types.UID("uid-" + ns + "-" + name))
	w.SetLabels(labels)
	w.SetCreationTimestamp(metav1.NewTime(start.Add(age)))
	return w
}

// newTrigger is the trigger "retire" of namespace ns: Nodes labelled
// stepwise.dev/retire=true, template "retire-node", ServiceAccount retirer.
func newTrigger() *v1alpha1.PipelineTrigger {
	return &v1alpha1.PipelineTrigger{
		ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: "ns", UID: "trigger-uid", Generation: 1},
		Spec: v1alpha1.PipelineTriggerSpec{
			Resource:           v1alpha1.TriggerResource{APIVersion: "v1", Kind: "Node"},
			Selector:           &v1alpha1.LabelSelector{MatchLabels: retiring},
			TemplateRef:        v1alpha1.TemplateRef{Name: "retire-node"},
			Params:             map[string]string{"node": "$(object.metadata.name)"},
			ServiceAccountName: "retirer",
			Concurrency:        1,
			WhenUnmatched:      v1alpha1.UnmatchedKeep,
			UpdatePolicy:       v1alpha1.UpdateImmutable,
			HistoryLimit:       10,
		},
	}
}

// recreatedTrigger is newTrigger created at start, with whenUnmatched Delete.
func recreatedTrigger() *v1alpha1.PipelineTrigger {
	trig := newTrigger()
	trig.CreationTimestamp = metav1.NewTime(start)
	trig.Spec.WhenUnmatched = v1alpha1.UnmatchedDelete
	return trig
}

// pipelineObject is a stepwise Pipeline of namespace ns as a dynamic informer holds it.
func pipelineObject(name string, labels map[string]string) *unstructured.Unstructured {
	p := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stepwise.dev/v1alpha1", "kind": "Pipeline",
		"metadata": map[string]any{"name": name, "namespace": "ns"},
		"spec":     map[string]any{"templateRef": map[string]any{"name": "retire-node"}},
	}}
	p.SetUID(types.UID("uid-" + name))
	p.SetLabels(labels)
	p.SetCreationTimestamp(metav1.NewTime(start))
	return p
}

// existingPipeline is an unfinished pipeline of trigger "retire" for obj: labelled with
// the trigger UID uid (none when empty, as the versions before LabelTriggerUID made them)
// and created at created.
func existingPipeline(obj *unstructured.Unstructured, uid string, created time.Time) *v1alpha1.Pipeline {
	name := PipelineName("retire", obj.GetName(), obj.GetUID())
	labels := map[string]string{v1alpha1.LabelTrigger: "retire", v1alpha1.LabelObjectUID: string(obj.GetUID())}
	if uid != "" {
		labels[v1alpha1.LabelTriggerUID] = uid
	}
	return &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Generation: 1,
			CreationTimestamp: metav1.NewTime(created), Labels: labels,
			// The admission policy records the operator as the creator of what it creates.
			Annotations: map[string]string{v1alpha1.AnnotationObject: ObjectKey(obj.GetNamespace(), obj.GetName()),
				v1alpha1.AnnotationCreatedBy: operatorUser},
		},
		Spec: v1alpha1.PipelineSpec{
			TemplateRef:        &v1alpha1.TemplateRef{Name: "retire-node"},
			Params:             map[string]string{"node": obj.GetName()},
			ServiceAccountName: "retirer",
			UpdatePolicy:       v1alpha1.UpdateImmutable,
		},
	}
}
