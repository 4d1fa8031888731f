// Package triggertest holds the objects that the tests of pkg/trigger and of its rules
// (pkg/trigger/rules) share: Nodes, WebApps and Pipelines as a dynamic informer holds
// them, and the trigger "retire" of Nodes.
package triggertest

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// Start is when the tests start: objects are created relative to it.
var Start = time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)

// Retiring are the labels Trigger selects.
var Retiring = map[string]string{"stepwise.dev/retire": "true"}

// Node is a Node created at Start plus age, with labels.
func Node(name string, age time.Duration, labels map[string]string) *unstructured.Unstructured {
	n := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"providerID": "cloud://" + name},
	}}
	n.SetUID(types.UID("uid-" + name))
	n.SetLabels(labels)
	n.SetCreationTimestamp(metav1.NewTime(Start.Add(age)))
	n.SetResourceVersion("1")
	return n
}

// ReadyNode is a Node whose Ready condition is True (as kubelet or kwok writes it).
func ReadyNode(name string, age time.Duration, labels map[string]string) *unstructured.Unstructured {
	n := Node(name, age, labels)
	SetReady(n, "True")
	return n
}

// SetReady sets the status of n's Ready condition, its only one.
func SetReady(n *unstructured.Unstructured, status string) {
	n.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": status}}}
}

// WebApp is a WebApp of namespace ns created at Start plus age, with labels.
func WebApp(ns, name string, age time.Duration, labels map[string]string) *unstructured.Unstructured {
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "demo.stepwise.dev/v1alpha1", "kind": "WebApp",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"image": "web:1", "replicas": int64(2)},
	}}
	w.SetUID(types.UID("uid-" + ns + "-" + name))
	w.SetLabels(labels)
	w.SetCreationTimestamp(metav1.NewTime(Start.Add(age)))
	w.SetResourceVersion("1")
	return w
}

// PipelineObject is a stepwise Pipeline of namespace ns as a dynamic informer holds it,
// created at Start.
func PipelineObject(name string, labels map[string]string) *unstructured.Unstructured {
	p := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stepwise.dev/v1alpha1", "kind": "Pipeline",
		"metadata": map[string]any{"name": name, "namespace": "ns"},
		"spec":     map[string]any{"templateRef": map[string]any{"name": "retire-node"}},
	}}
	p.SetUID(types.UID("uid-" + name))
	p.SetLabels(labels)
	p.SetCreationTimestamp(metav1.NewTime(Start))
	p.SetResourceVersion("1")
	return p
}

// Trigger is the trigger "retire" of namespace ns: Nodes labelled Retiring, template
// "retire-node", ServiceAccount retirer.
func Trigger() *v1alpha1.PipelineTrigger {
	return &v1alpha1.PipelineTrigger{
		ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: "ns", UID: "trigger-uid", Generation: 1},
		Spec: v1alpha1.PipelineTriggerSpec{
			Resource:           v1alpha1.TriggerResource{APIVersion: "v1", Kind: "Node"},
			Selector:           &v1alpha1.LabelSelector{MatchLabels: Retiring},
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

// OperatorUser is the user the operator acts as in the tests.
const OperatorUser = "system:serviceaccount:stepwise-system:stepwise-operator"

// RecreatedTrigger is Trigger created at Start, with whenUnmatched Delete: a pipeline it
// took for its own would hold its only place (concurrency 1), and one whose object is
// gone would be deleted.
func RecreatedTrigger() *v1alpha1.PipelineTrigger {
	trig := Trigger()
	trig.CreationTimestamp = metav1.NewTime(Start)
	trig.Spec.WhenUnmatched = v1alpha1.UnmatchedDelete
	return trig
}

// ExistingPipeline is an unfinished pipeline named name of trigger "retire" for obj, whose
// key (namespace/name) is objectKey, made before the test's sync: labelled with the
// trigger UID uid (none when empty, as the versions before LabelTriggerUID made them),
// created at created by OperatorUser.
func ExistingPipeline(name, objectKey string, obj *unstructured.Unstructured, uid string, created time.Time) *v1alpha1.Pipeline {
	labels := map[string]string{v1alpha1.LabelTrigger: "retire", v1alpha1.LabelObjectUID: string(obj.GetUID())}
	if uid != "" {
		labels[v1alpha1.LabelTriggerUID] = uid
	}
	return &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", UID: types.UID("uid-" + name), ResourceVersion: "1", Generation: 1,
			CreationTimestamp: metav1.NewTime(created), Labels: labels,
			// The admission policy records the operator as the creator of what it creates.
			Annotations: map[string]string{v1alpha1.AnnotationObject: objectKey, v1alpha1.AnnotationCreatedBy: OperatorUser},
		},
		Spec: v1alpha1.PipelineSpec{
			TemplateRef:        &v1alpha1.TemplateRef{Name: "retire-node"},
			Params:             map[string]string{"node": obj.GetName()},
			ServiceAccountName: "retirer",
			UpdatePolicy:       v1alpha1.UpdateImmutable,
		},
	}
}
