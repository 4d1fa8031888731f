package trigger

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// TestTriggerMatchesByField: only the labelled nodes that are not yet unschedulable get a
// pipeline; a field path that does not parse makes the trigger Ready=False.
func TestTriggerMatchesByField(t *testing.T) {
	schedulable := triggertest.Node("node-1", 0, retiring)
	cordoned := triggertest.Node("node-2", time.Second, retiring)
	require.NoError(t, unstructured.SetNestedField(cordoned.Object, true, "spec", "unschedulable"))
	trig := triggertest.Trigger()
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
	assert.Equal(t, v1alpha1.TriggerReasonInvalidSelector, ready.Reason)
	assert.Contains(t, ready.Message, "spec.matchFields[0].field: ")
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

// TestTriggerOnPipelinesDoesNotFeedOnItself: a trigger on stepwise Pipelines makes one
// pipeline for the Pipeline a person made, and none for its own, sync after sync (it made
// one more at every sync before).
func TestTriggerOnPipelinesDoesNotFeedOnItself(t *testing.T) {
	manual := triggertest.PipelineObject("manual", nil)
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
	assert.Equal(t, []string{rules.PipelineName("feed", "manual", manual.GetUID())}, f.pipelineNames())
	got := f.trigger("feed")
	assert.Equal(t, int32(1), got.Status.Matched)
	assert.Equal(t, v1alpha1.TriggerReasonActive, readyOf(got).Reason)
}
