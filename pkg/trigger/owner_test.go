package trigger

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// existingPipeline is the unfinished pipeline of trigger "retire" for obj that the
// trigger would make, made before the test's sync (triggertest.ExistingPipeline).
func existingPipeline(obj *unstructured.Unstructured, uid string, created time.Time) *v1alpha1.Pipeline {
	name := rules.PipelineName("retire", obj.GetName(), obj.GetUID())
	return triggertest.ExistingPipeline(name, rules.ObjectKey(obj.GetNamespace(), obj.GetName()), obj, uid, created)
}

// TestRecreatedTriggerLeavesTheOldTriggersPipelines: a trigger deleted and created again
// under its name (another UID) neither counts nor deletes the pipelines of the earlier one,
// those it made with its UID nor those an old version made before the new trigger existed;
// an object whose pipeline name such a pipeline holds waits, and says why.
func TestRecreatedTriggerLeavesTheOldTriggersPipelines(t *testing.T) {
	n1, n2 := triggertest.Node("n1", 0, retiring), triggertest.Node("n2", time.Second, retiring)
	gone, goneLegacy := triggertest.Node("gone", 0, retiring), triggertest.Node("gone-legacy", 0, retiring)
	oldN1 := existingPipeline(n1, "old-uid", start.Add(-time.Hour))
	oldGone := existingPipeline(gone, "old-uid", start.Add(-time.Hour))
	oldLegacy := existingPipeline(goneLegacy, "", start.Add(-time.Hour))
	f := newFixture(t, objs(triggertest.RecreatedTrigger(), newTemplate("retire-node"), n1, n2, oldN1, oldGone, oldLegacy))

	f.sync("retire")

	assert.Equal(t, []string{"create pipelines", "update pipelinetriggers/status"}, f.writes(),
		"nothing deleted or stamped; the only place goes to n2")
	mine := f.pipelineFor("retire", n2)
	assert.Equal(t, "trigger-uid", mine.Labels[v1alpha1.LabelTriggerUID])
	for _, old := range []*v1alpha1.Pipeline{oldN1, oldGone, oldLegacy} {
		got, err := f.client.StepwiseV1alpha1().Pipelines("ns").Get(f.ctx, old.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, old.Labels, got.Labels, "left as it was")
	}
	got := f.trigger("retire")
	assert.Equal(t, int32(1), got.Status.Running, "n2's only")
	assert.Equal(t, []string{"n1"}, got.Status.Queue)
	assert.Contains(t, readyOf(got).Message, "n1 cannot start: pipeline "+oldN1.Name+" exists and is not this trigger's")
	assert.Contains(t, f.events(), "Warning Waiting n1 waits: pipeline "+oldN1.Name+
		" exists and is not this trigger's (an earlier trigger of the same name made it, someone other than the operator did, or it is a copy): delete it for the trigger to run one")

	// Once deleted, n1's pipeline is the trigger's own.
	require.NoError(t, f.client.StepwiseV1alpha1().Pipelines("ns").Delete(f.ctx, oldN1.Name, metav1.DeleteOptions{}))
	f.finish("retire", n2)
	f.client.ClearActions()
	f.sync("retire")
	assert.Equal(t, "trigger-uid", f.pipelineFor("retire", n1).Labels[v1alpha1.LabelTriggerUID])
}

// TestCopiesAreNotAdopted: a copy of a trigger's pipeline that kept its labels (as
// kubectl stepwise rerun did) is not the trigger's: it takes no place, the object gets a
// pipeline of its own, and the copy is not deleted with it.
func TestCopiesAreNotAdopted(t *testing.T) {
	tests := []struct {
		name string
		uid  string
	}{
		{name: "a copy of a pipeline with the trigger's UID", uid: "trigger-uid"},
		{name: "a copy of an old version's pipeline", uid: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n1 := triggertest.Node("n1", 0, retiring)
			copied := existingPipeline(n1, tt.uid, start.Add(time.Minute))
			copied.Name += "-x7k2q"
			copied.UID = "uid-copy"
			f := newFixture(t, objs(triggertest.RecreatedTrigger(), newTemplate("retire-node"), n1, copied))

			f.sync("retire")
			assert.Equal(t, []string{"create pipelines", "update pipelinetriggers/status"}, f.writes())
			f.pipelineFor("retire", n1)

			f.deleteObject(n1)
			f.client.ClearActions()
			f.sync("retire")
			assert.Equal(t, []string{"delete pipelines", "update pipelinetriggers/status"}, f.writes())
			assert.Equal(t, []string{copied.Name}, f.pipelineNames(), "the copy stays")
		})
	}
}

// TestPipelineOfAnOldVersionIsAdoptedOnce: a pipeline made before LabelTriggerUID existed,
// after the trigger was created, is the trigger's: it is stamped with the trigger's UID,
// once, and counted. One made at the trigger's creation second is too; one made before is
// an earlier trigger's. One that an editor of the namespace made or changed (as the API
// server recorded: AnnotationCreatedBy, AnnotationEditedBy) is never adopted, whatever
// its labels: it would count against the trigger's failure budget, or hold its object.
func TestPipelineOfAnOldVersionIsAdoptedOnce(t *testing.T) {
	tests := []struct {
		name        string
		created     time.Time
		change      func(*v1alpha1.Pipeline)
		wantAdopted bool
	}{
		{name: "made after the trigger", created: start.Add(time.Minute), wantAdopted: true},
		{name: "made in the trigger's creation second", created: start, wantAdopted: true},
		{name: "made before the trigger", created: start.Add(-time.Second)},
		{name: "like an old version's, made by an editor of the namespace", created: start.Add(time.Minute),
			change: func(p *v1alpha1.Pipeline) { p.Annotations[v1alpha1.AnnotationCreatedBy] = "alice" }},
		{name: "an old version's, its trigger label changed since by an editor", created: start.Add(time.Minute),
			change: func(p *v1alpha1.Pipeline) { p.Annotations[v1alpha1.AnnotationEditedBy] = "alice" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n1, n2 := triggertest.Node("n1", 0, retiring), triggertest.Node("n2", time.Second, retiring)
			legacy := existingPipeline(n1, "", tt.created)
			if tt.change != nil {
				tt.change(legacy)
			}
			trig := triggertest.RecreatedTrigger()
			trig.Spec.WhenUnmatched = v1alpha1.UnmatchedKeep
			f := newFixture(t, objs(trig, newTemplate("retire-node"), n1, n2, legacy))

			f.sync("retire")
			got, err := f.client.StepwiseV1alpha1().Pipelines("ns").Get(f.ctx, legacy.Name, metav1.GetOptions{})
			require.NoError(t, err)
			if !tt.wantAdopted {
				assert.Equal(t, legacy.Labels, got.Labels)
				assert.Equal(t, []string{"create pipelines", "update pipelinetriggers/status"}, f.writes(), "n2 starts")
				return
			}
			assert.Equal(t, "trigger-uid", got.Labels[v1alpha1.LabelTriggerUID])
			assert.Equal(t, []string{"patch pipelines", "update pipelinetriggers/status"}, f.writes(), "n2 waits for n1's")
			assert.Equal(t, []string{"n2"}, f.trigger("retire").Status.Queue)

			f.client.ClearActions()
			f.sync("retire")
			assert.Empty(t, f.writes(), "adopted once")
		})
	}
}
