package trigger

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

func TestMatchFields(t *testing.T) {
	node := newNode("node-1", 0, nil)
	node.Object["spec"] = map[string]any{
		"providerID": "cloud://node-1", "unschedulable": true, "podCIDRs": []any{"10.0.0.0/24"},
	}
	node.SetAnnotations(map[string]string{"example.com/pool": "blue"})
	req := func(field string, op v1alpha1.FieldOperator, values ...string) v1alpha1.FieldRequirement {
		return v1alpha1.FieldRequirement{Field: field, Operator: op, Values: values}
	}
	tests := []struct {
		name string
		reqs []v1alpha1.FieldRequirement
		want bool
	}{
		{name: "none", want: true},
		{name: "In a string", reqs: []v1alpha1.FieldRequirement{req("spec.providerID", v1alpha1.FieldIn, "x", "cloud://node-1")}, want: true},
		{name: "In a bool as text", reqs: []v1alpha1.FieldRequirement{req("spec.unschedulable", v1alpha1.FieldIn, "true")}, want: true},
		{name: "not In", reqs: []v1alpha1.FieldRequirement{req("spec.providerID", v1alpha1.FieldIn, "cloud://node-2")}},
		{name: "In, field missing", reqs: []v1alpha1.FieldRequirement{req("spec.taints", v1alpha1.FieldIn, "")}},
		{name: "In, a list is in no set", reqs: []v1alpha1.FieldRequirement{req("spec.podCIDRs", v1alpha1.FieldIn, "[10.0.0.0/24]")}},
		{name: "NotIn", reqs: []v1alpha1.FieldRequirement{req("spec.providerID", v1alpha1.FieldNotIn, "cloud://node-2")}, want: true},
		{name: "NotIn, among the values", reqs: []v1alpha1.FieldRequirement{req("spec.unschedulable", v1alpha1.FieldNotIn, "true")}},
		{name: "NotIn, field missing", reqs: []v1alpha1.FieldRequirement{req("spec.taints", v1alpha1.FieldNotIn, "x")}, want: true},
		{name: "Exists", reqs: []v1alpha1.FieldRequirement{req("spec.podCIDRs", v1alpha1.FieldExists)}, want: true},
		{name: "Exists, missing", reqs: []v1alpha1.FieldRequirement{req("spec.taints", v1alpha1.FieldExists)}},
		{name: "Exists, through a string", reqs: []v1alpha1.FieldRequirement{req("spec.providerID.x", v1alpha1.FieldExists)}},
		{name: "DoesNotExist", reqs: []v1alpha1.FieldRequirement{req("spec.taints", v1alpha1.FieldDoesNotExist)}, want: true},
		{name: "DoesNotExist, present", reqs: []v1alpha1.FieldRequirement{req("spec.unschedulable", v1alpha1.FieldDoesNotExist)}},
		{name: "bracketed key", reqs: []v1alpha1.FieldRequirement{req("metadata.annotations['example.com/pool']", v1alpha1.FieldIn, "blue")}, want: true},
		{name: "all must hold", reqs: []v1alpha1.FieldRequirement{
			req("spec.unschedulable", v1alpha1.FieldExists), req("spec.providerID", v1alpha1.FieldIn, "other"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseMatchFields(tt.reqs)
			require.NoError(t, err)
			assert.Equal(t, tt.want, m.Matches(node))
		})
	}
}

func TestMatchFieldsErrors(t *testing.T) {
	tests := []struct {
		name    string
		req     v1alpha1.FieldRequirement
		wantErr string
	}{
		{name: "bad path", req: v1alpha1.FieldRequirement{Field: "spec..x", Operator: v1alpha1.FieldExists},
			wantErr: "spec.matchFields[1].field: "},
		{name: "In without values", req: v1alpha1.FieldRequirement{Field: "spec.x", Operator: v1alpha1.FieldIn},
			wantErr: "spec.matchFields[1]: In needs values"},
		{name: "Exists with values", req: v1alpha1.FieldRequirement{Field: "spec.x", Operator: v1alpha1.FieldExists, Values: []string{"a"}},
			wantErr: "spec.matchFields[1]: Exists takes no values"},
		{name: "unknown operator", req: v1alpha1.FieldRequirement{Field: "spec.x", Operator: "Gt", Values: []string{"1"}},
			wantErr: `spec.matchFields[1].operator: "Gt" is not In, NotIn, Exists or DoesNotExist`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok := v1alpha1.FieldRequirement{Field: "spec.y", Operator: v1alpha1.FieldExists}
			_, err := ParseMatchFields([]v1alpha1.FieldRequirement{ok, tt.req})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

// TestTriggerMatchesByField: only the labelled nodes that are not yet unschedulable get a
// pipeline; a field path that does not parse makes the trigger Ready=False.
func TestTriggerMatchesByField(t *testing.T) {
	schedulable := newNode("node-1", 0, retiring)
	cordoned := newNode("node-2", time.Second, retiring)
	require.NoError(t, unstructured.SetNestedField(cordoned.Object, true, "spec", "unschedulable"))
	trig := newTrigger()
	trig.Spec.Concurrency = 5
	trig.Spec.MatchFields = []v1alpha1.FieldRequirement{{Field: "spec.unschedulable", Operator: v1alpha1.FieldDoesNotExist}}
	f := newFixture(t, objs(trig, newTemplate("retire-node"), schedulable, cordoned))

	f.sync("retire")
	f.pipelineFor("retire", schedulable)
	assert.Len(t, f.pipelineList(), 1, "no pipeline for the unschedulable node")
	assert.Equal(t, int32(1), f.trigger("retire").Status.Matched)

	f.updateTrigger("retire", func(tr *v1alpha1.PipelineTrigger) {
		tr.Spec.MatchFields[0].Field = "spec[unschedulable]"
	})
	f.sync("retire")
	ready := readyOf(f.trigger("retire"))
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, ReasonInvalidSelector, ready.Reason)
	assert.Contains(t, ready.Message, "spec.matchFields[0].field: ")
}

// pipelineObject is a stepwise Pipeline of namespace ns as the dynamic informer holds it.
func pipelineObject(name string, labels map[string]string) *unstructured.Unstructured {
	p := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stepwise.dev/v1alpha1", "kind": "Pipeline",
		"metadata": map[string]any{"name": name, "namespace": "ns"},
		"spec":     map[string]any{"templateRef": map[string]any{"name": "retire-node"}},
	}}
	p.SetUID(types.UID("uid-" + name))
	p.SetLabels(labels)
	p.SetCreationTimestamp(metav1.NewTime(start))
	p.SetResourceVersion("1")
	return p
}

// pipelineTrigger is the trigger "feed" of namespace ns: every stepwise Pipeline of ns,
// ServiceAccount deployer, which may list and watch them.
func pipelineTrigger() *v1alpha1.PipelineTrigger {
	trig := webAppTrigger()
	trig.Name, trig.UID = "feed", "feed-uid"
	trig.Spec.Resource = v1alpha1.TriggerResource{APIVersion: "stepwise.dev/v1alpha1", Kind: "Pipeline"}
	trig.Spec.TemplateRef.Name = "retire-node"
	trig.Spec.Params = map[string]string{"node": "$(object.metadata.name)"}
	trig.Spec.WhenUnmatched = v1alpha1.UnmatchedKeep
	return trig
}

// TestNoTriggerMatchesATriggersPipeline: a Pipeline a trigger made (it carries
// LabelTrigger) is no trigger's object; other Pipelines, and objects of other kinds with
// that label, are.
func TestNoTriggerMatchesATriggersPipeline(t *testing.T) {
	tests := []struct {
		name   string
		gr     schema.GroupResource
		labels map[string]string
		want   bool
	}{
		{name: "a Pipeline a trigger made", gr: pipelinesGVR.GroupResource(),
			labels: map[string]string{LabelTrigger: "feed", LabelTriggerUID: "feed-uid"}, want: true},
		{name: "a Pipeline an old version made", gr: pipelinesGVR.GroupResource(), labels: map[string]string{LabelTrigger: "other"}, want: true},
		{name: "a Pipeline with an empty trigger label", gr: pipelinesGVR.GroupResource(), labels: map[string]string{LabelTrigger: ""}, want: true},
		{name: "a Pipeline a person made", gr: pipelinesGVR.GroupResource(), labels: map[string]string{"team": "ops"}},
		{name: "a rerun of a trigger's Pipeline", gr: pipelinesGVR.GroupResource(), labels: map[string]string{LabelObjectUID: "uid-n1"}},
		{name: "a WebApp with the label", gr: webappsGVR.GroupResource(), labels: map[string]string{LabelTrigger: "feed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, MadeByTrigger(tt.gr, pipelineObject("p", tt.labels)))
		})
	}
}

// TestTriggerOnPipelinesDoesNotFeedOnItself: a trigger on stepwise Pipelines makes one
// pipeline for the Pipeline a person made, and none for its own, sync after sync (it made
// one more at every sync before).
func TestTriggerOnPipelinesDoesNotFeedOnItself(t *testing.T) {
	manual := pipelineObject("manual", nil)
	f := newFixture(t, objs(pipelineTrigger(), newTemplate("retire-node"), manual),
		withResources(DefaultResources+",pipelines.stepwise.dev"))
	f.rbac.allow("system:serviceaccount:ns:deployer", "pipelines", "ns", "list", "watch")

	for range 3 {
		f.sync("feed")
		// The API server serves the pipelines the trigger made to its informer too.
		for _, p := range f.pipelineList() {
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&p)
			require.NoError(t, err)
			u := &unstructured.Unstructured{Object: obj}
			u.SetAPIVersion("stepwise.dev/v1alpha1")
			u.SetKind("Pipeline")
			if _, err := f.dynamic.Resource(pipelinesGVR).Namespace("ns").Get(f.ctx, p.Name, metav1.GetOptions{}); err != nil {
				f.createObject(u)
			}
		}
	}
	assert.Equal(t, []string{pipelineName("feed", "manual", manual.GetUID())}, f.pipelineNames())
	got := f.trigger("feed")
	assert.Equal(t, int32(1), got.Status.Matched)
	assert.Equal(t, ReasonActive, readyOf(got).Reason)
}
