package trigger

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// TestOnePipelinePerMatchingObject: each matching Node gets one pipeline, named after the
// trigger and the node, labelled and annotated with both, running the template with the
// node's params as the trigger's ServiceAccount; a cluster-scoped object owns nothing.
func TestOnePipelinePerMatchingObject(t *testing.T) {
	n1 := triggertest.Node("node-1", 0, retiring)
	n2 := triggertest.Node("node-2", time.Second, retiring)
	other := triggertest.Node("node-3", 0, map[string]string{"stepwise.dev/retire": "false"})
	trig := triggertest.Trigger()
	trig.Spec.Concurrency = 5
	trig.Spec.Params["id"] = "id=$(object.spec.providerID)"
	f := newFixture(t, objs(trig, newTemplate("retire-node"), n1, n2, other))

	f.sync("retire")

	assert.Empty(t, f.reads(), "the sync reads from caches only")
	for _, a := range f.kube.Actions() {
		assert.Equal(t, "create subjectaccessreviews", a.GetVerb()+" "+a.GetResource().Resource)
	}
	assert.Equal(t, []string{"create pipelines", "create pipelines", "update pipelinetriggers/status"}, f.writes())
	assert.Empty(t, f.events(), "a pipeline's creation is the pipeline, not an Event")
	p := f.pipelineFor("retire", n1)
	assert.Equal(t, "retire-node-1-5cu6s", p.Name, "TRIGGER-OBJECT, a dash and a hash of the object's UID")
	assert.Equal(t, map[string]string{v1alpha1.LabelTrigger: "retire", v1alpha1.LabelTriggerUID: "trigger-uid", v1alpha1.LabelObjectUID: "uid-node-1"}, p.Labels)
	assert.Equal(t, map[string]string{v1alpha1.AnnotationObject: "node-1"}, p.Annotations)
	assert.Empty(t, p.OwnerReferences)
	assert.Equal(t, v1alpha1.PipelineSpec{
		TemplateRef:        &v1alpha1.TemplateRef{Name: "retire-node"},
		Params:             map[string]string{"node": "node-1", "id": "id=cloud://node-1"},
		ServiceAccountName: "retirer",
		UpdatePolicy:       v1alpha1.UpdateImmutable,
	}, p.Spec)
	f.pipelineFor("retire", n2)
	assert.Len(t, f.pipelineList(), 2, "nothing for the node that does not match")

	got := f.trigger("retire")
	assert.Equal(t, int64(1), got.Status.ObservedGeneration)
	assert.Equal(t, int32(2), got.Status.Matched)
	assert.Equal(t, int32(2), got.Status.Running)
	assert.Zero(t, got.Status.Waiting)
	assert.Empty(t, got.Status.Queue)
	ready := readyOf(got)
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	assert.Equal(t, v1alpha1.TriggerReasonActive, ready.Reason)
	assert.Equal(t, int64(1), ready.ObservedGeneration)

	// Nothing changed: nothing is written.
	f.client.ClearActions()
	f.sync("retire")
	assert.Empty(t, f.writes())
	assert.Empty(t, f.events())
}

// TestConcurrencyBoundsUnfinishedPipelines: at most concurrency pipelines are unfinished;
// the other objects wait, oldest first (then by name), and start as pipelines finish. A
// failed pipeline holds its place until torn down after its failure.
func TestConcurrencyBoundsUnfinishedPipelines(t *testing.T) {
	nodes := []*unstructured.Unstructured{
		triggertest.Node("e", 0, retiring),
		triggertest.Node("b", time.Second, retiring),
		triggertest.Node("a", time.Second, retiring), // same age as b: by name
		triggertest.Node("d", 3*time.Second, retiring),
		triggertest.Node("c", 4*time.Second, retiring),
	}
	trig := triggertest.Trigger()
	trig.Spec.Concurrency = 2
	trig.Spec.FailureBudget = 10 // a's failure does not stop the trigger here
	f := newFixture(t, objs(trig, newTemplate("retire-node"), nodes[0], nodes[1], nodes[2], nodes[3], nodes[4]))
	pipelineOf := func(obj *unstructured.Unstructured) string {
		return rules.PipelineName("retire", obj.GetName(), obj.GetUID())
	}

	f.sync("retire")
	assert.ElementsMatch(t, []string{pipelineOf(nodes[0]), pipelineOf(nodes[2])}, f.pipelineNames(), "e then a")
	got := f.trigger("retire")
	assert.Equal(t, int32(5), got.Status.Matched)
	assert.Equal(t, int32(2), got.Status.Running)
	assert.Equal(t, int32(3), got.Status.Waiting)
	assert.Equal(t, []string{"b", "d", "c"}, got.Status.Queue)
	// A pipeline's creation is the pipeline and the status' counts; the wait is one
	// Event for the trigger, not one per object (make bench: Events per pipeline).
	assert.Equal(t, []string{
		"Normal Waiting objects wait: 2 pipelines of the trigger are unfinished (concurrency 2); first b",
	}, f.events())

	// Again: nothing new starts, and the wait is not reported again.
	f.sync("retire")
	assert.Len(t, f.pipelineList(), 2)
	assert.Empty(t, f.events())

	// e succeeds: b starts.
	f.finish("retire", nodes[0])
	f.sync("retire")
	assert.Len(t, f.pipelineList(), 3)
	f.pipelineFor("retire", nodes[1])
	got = f.trigger("retire")
	assert.Equal(t, []string{"d", "c"}, got.Status.Queue)
	assert.Equal(t, int32(1), got.Status.Succeeded)
	assert.Equal(t, int32(2), got.Status.Running)

	// a fails and stops: it holds its place.
	f.setPipelineStatus(pipelineOf(nodes[2]), func(s *v1alpha1.PipelineStatus) {
		s.Phase = v1alpha1.PipelineFailed
		s.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "StepFailed"}}
	})
	f.sync("retire")
	assert.Len(t, f.pipelineList(), 3)
	assert.Equal(t, int32(2), f.trigger("retire").Status.Running)

	// Torn down after its failure, it is finished: d starts.
	f.setPipelineStatus(pipelineOf(nodes[2]), func(s *v1alpha1.PipelineStatus) {
		s.Conditions[0].Reason = "TornDownAfterFailure"
	})
	f.sync("retire")
	f.pipelineFor("retire", nodes[3])
	got = f.trigger("retire")
	assert.Equal(t, int32(1), got.Status.Failed)
	assert.Equal(t, int32(1), got.Status.Succeeded)
	assert.Equal(t, int32(2), got.Status.Running)
	assert.Equal(t, int32(1), got.Status.Waiting)
	assert.Equal(t, []string{"c"}, got.Status.Queue)
}

func TestSuspendStartsNothing(t *testing.T) {
	n1, n2 := triggertest.Node("n1", 0, retiring), triggertest.Node("n2", time.Second, retiring)
	trig := triggertest.Trigger()
	f := newFixture(t, objs(trig, newTemplate("retire-node"), n1, n2))
	f.sync("retire")
	require.Len(t, f.pipelineList(), 1)
	f.events()

	f.updateTrigger("retire", func(tr *v1alpha1.PipelineTrigger) { tr.Spec.Suspend = true })
	f.finish("retire", n1)
	f.client.ClearActions()
	f.sync("retire")
	assert.Equal(t, []string{"update pipelinetriggers/status"}, f.writes(), "n2 does not start")
	got := f.trigger("retire")
	assert.Equal(t, v1alpha1.TriggerReasonSuspended, readyOf(got).Reason)
	assert.Equal(t, metav1.ConditionTrue, readyOf(got).Status)
	assert.Equal(t, int32(1), got.Status.Waiting)
	assert.Equal(t, []string{"n2"}, got.Status.Queue)

	f.updateTrigger("retire", func(tr *v1alpha1.PipelineTrigger) { tr.Spec.Suspend = false })
	f.sync("retire")
	f.pipelineFor("retire", n2)
	assert.Equal(t, v1alpha1.TriggerReasonActive, readyOf(f.trigger("retire")).Reason)
}

// TestTriggerThatCannotAct: a trigger whose kind, rights, selector, params or template are
// not usable is Ready=False with a reason, and creates nothing.
func TestTriggerThatCannotAct(t *testing.T) {
	tests := []struct {
		name        string
		change      func(*v1alpha1.PipelineTrigger)
		noTemplate  bool
		deny        bool
		wantReason  string
		wantMsg     string
		wantRequeue bool
		wantReviews bool
		wantCounts  bool
	}{
		{name: "unknown kind", change: func(tr *v1alpha1.PipelineTrigger) { tr.Spec.Resource.Kind = "Nope" },
			wantReason: v1alpha1.TriggerReasonInvalidResource, wantMsg: "the API server serves no kind Nope in v1", wantRequeue: true},
		{name: "kind not allowed", change: func(tr *v1alpha1.PipelineTrigger) { tr.Spec.Resource.Kind = "Secret" },
			wantReason: v1alpha1.TriggerReasonResourceNotAllowed, wantMsg: `its installer must add "secrets" to --trigger-resources`},
		{name: "ServiceAccount may not list the kind", deny: true, wantReviews: true, wantRequeue: true,
			wantReason: v1alpha1.TriggerReasonForbidden, wantMsg: "ServiceAccount ns/retirer may not list and watch nodes cluster-wide"},
		{name: "bad selector", wantReviews: true, wantRequeue: true, change: func(tr *v1alpha1.PipelineTrigger) {
			tr.Spec.Selector = &v1alpha1.LabelSelector{MatchExpressions: []v1alpha1.LabelSelectorRequirement{{Key: "a", Operator: "Bad"}}}
		}, wantReason: v1alpha1.TriggerReasonInvalidSelector, wantMsg: `"Bad" is not a valid label selector operator`},
		{name: "bad reference", wantReviews: true, wantRequeue: true, change: func(tr *v1alpha1.PipelineTrigger) {
			tr.Spec.Params["node"] = "$(object.metadata..name)"
		}, wantReason: v1alpha1.TriggerReasonInvalidParameters, wantMsg: "params.node: $(object.metadata..name): field name expected at 9"},
		{name: "no template", noTemplate: true, wantReviews: true, wantRequeue: true, wantCounts: true,
			wantReason: v1alpha1.TriggerReasonTemplateNotFound, wantMsg: "PipelineTemplate ns/retire-node does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trig := triggertest.Trigger()
			if tt.change != nil {
				tt.change(trig)
			}
			in := objs(trig, triggertest.Node("n1", 0, retiring))
			if !tt.noTemplate {
				in = append(in, newTemplate("retire-node"))
			}
			f := newFixture(t, in, withResources("nodes,webapps.demo.stepwise.dev"))
			if tt.deny {
				f.rbac.allowed = nil
			}

			requeue := f.sync("retire")
			assert.Equal(t, []string{"update pipelinetriggers/status"}, f.writes(), "nothing created")
			got := f.trigger("retire")
			ready := readyOf(got)
			assert.Equal(t, metav1.ConditionFalse, ready.Status)
			assert.Equal(t, tt.wantReason, ready.Reason)
			assert.Contains(t, ready.Message, tt.wantMsg)
			assert.Equal(t, tt.wantRequeue, requeue > 0, "requeue %s", requeue)
			assert.Equal(t, tt.wantReviews, len(f.rbac.reviews) > 0, "SubjectAccessReviews")
			if tt.wantCounts {
				assert.Equal(t, int32(1), got.Status.Matched)
				assert.Equal(t, []string{"n1"}, got.Status.Queue)
			} else {
				assert.Zero(t, got.Status.Matched, "nothing of the objects in the status")
				assert.Empty(t, got.Status.Queue)
			}
			assert.Empty(t, f.events())
		})
	}
}

// TestForbiddenUntilGranted: a denied trigger watches nothing and says nothing of the
// objects; once its ServiceAccount is granted the rights, it acts within the answer's TTL.
func TestForbiddenUntilGranted(t *testing.T) {
	n1 := triggertest.Node("n1", 0, retiring)
	f := newFixture(t, objs(triggertest.Trigger(), newTemplate("retire-node"), n1))
	f.rbac.allowed = nil

	requeue := f.sync("retire")
	assert.Equal(t, time.Minute, requeue, "asked again when the answer expires")
	assert.Nil(t, f.c.objects.Informer(nodesGVR), "no informer started for a denied trigger")
	assert.Equal(t, v1alpha1.TriggerReasonForbidden, readyOf(f.trigger("retire")).Reason)
	assert.Empty(t, f.pipelineList())

	f.rbac.allow(nodeRetirerUser, "nodes", "", "list", "watch")
	f.clock.Step(30 * time.Second)
	f.sync("retire")
	assert.Empty(t, f.pipelineList(), "the answer is kept for a minute")

	f.clock.Step(30 * time.Second)
	f.sync("retire")
	assert.Len(t, f.pipelineList(), 1)
	assert.Equal(t, v1alpha1.TriggerReasonActive, readyOf(f.trigger("retire")).Reason)

	// Rights taken away: nothing more starts, and the status forgets the objects.
	f.rbac.allowed = nil
	f.createObject(triggertest.Node("n2", time.Second, retiring))
	f.finish("retire", n1)
	f.clock.Step(time.Minute)
	f.sync("retire")
	assert.Len(t, f.pipelineList(), 1)
	got := f.trigger("retire")
	assert.Equal(t, v1alpha1.TriggerReasonForbidden, readyOf(got).Reason)
	assert.Zero(t, got.Status.Matched)
	assert.Zero(t, got.Status.Succeeded)
	assert.Empty(t, got.Status.Queue)
}

// TestTemplateAppearing: a trigger whose template is missing starts nothing, and is looked
// at again when the template appears.
func TestTemplateAppearing(t *testing.T) {
	f := newFixture(t, objs(triggertest.Trigger(), triggertest.Node("n1", 0, retiring)))
	f.sync("retire")
	assert.Empty(t, f.pipelineList())
	assert.Equal(t, v1alpha1.TriggerReasonTemplateNotFound, readyOf(f.trigger("retire")).Reason)
	drain(f.c)

	tpl := newTemplate("retire-node")
	require.NoError(t, f.client.Tracker().Add(tpl))
	f.c.onTemplate(tpl)
	assert.Equal(t, []string{"ns/retire"}, drain(f.c), "the trigger is queued")
	require.NoError(t, f.templates.Add(tpl))
	f.sync("retire")
	assert.Len(t, f.pipelineList(), 1)
	assert.Equal(t, v1alpha1.TriggerReasonActive, readyOf(f.trigger("retire")).Reason)
}

// TestObjectWithoutAFieldWaits: an object that lacks a field the params refer to waits,
// without a pipeline, and the status says which object and which reference; the others
// start in its place; it starts once it has the field.
func TestObjectWithoutAFieldWaits(t *testing.T) {
	bad := triggertest.Node("bad", 0, retiring)
	unstructured.RemoveNestedField(bad.Object, "spec", "providerID")
	good := triggertest.Node("good", time.Second, retiring)
	trig := triggertest.Trigger()
	trig.Spec.Params["id"] = "$(object.spec.providerID)"
	f := newFixture(t, objs(trig, newTemplate("retire-node"), bad, good))

	f.sync("retire")
	assert.Equal(t, []string{rules.PipelineName("retire", "good", good.GetUID())}, f.pipelineNames())
	got := f.trigger("retire")
	assert.Equal(t, int32(1), got.Status.Waiting)
	assert.Equal(t, []string{"bad"}, got.Status.Queue)
	ready := readyOf(got)
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	assert.Contains(t, ready.Message, "bad cannot start: params.id: $(object.spec.providerID): the object has no field spec.providerID")
	events := f.events()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], "Warning Waiting bad waits: params.id: $(object.spec.providerID)")

	f.finish("retire", good)
	unstructured.SetNestedField(bad.Object, "cloud://bad", "spec", "providerID") //nolint:errcheck // a map
	f.updateObject(bad)
	f.sync("retire")
	assert.Equal(t, "cloud://bad", f.pipelineFor("retire", bad).Spec.Params["id"])
	assert.NotContains(t, readyOf(f.trigger("retire")).Message, "cannot start")

	// The field goes again: the pipeline keeps its params, and the status says why.
	unstructured.RemoveNestedField(bad.Object, "spec", "providerID")
	f.updateObject(bad)
	f.sync("retire")
	assert.Equal(t, "cloud://bad", f.pipelineFor("retire", bad).Spec.Params["id"])
	assert.Contains(t, readyOf(f.trigger("retire")).Message, "bad keeps the params of its pipeline: params.id:")
}

// TestObjectErrorsAreBounded: however many objects cannot start, the message names one
// and counts the others.
func TestObjectErrorsAreBounded(t *testing.T) {
	in := objs(newTemplate("retire-node"))
	trig := triggertest.Trigger()
	trig.Spec.Params["x"] = "$(object.spec.missing)"
	in = append(in, trig)
	for i := range 100 {
		in = append(in, triggertest.Node("n"+string(rune('a'+i%26))+string(rune('a'+i/26)), time.Duration(i)*time.Second, retiring))
	}
	f := newFixture(t, in)
	f.sync("retire")
	got := f.trigger("retire")
	assert.Equal(t, int32(100), got.Status.Waiting)
	assert.Len(t, got.Status.Queue, 50, "the first 50")
	msg := readyOf(got).Message
	assert.Contains(t, msg, "naa cannot start")
	assert.Contains(t, msg, "and 99 more objects that cannot start")
	assert.Less(t, len(msg), 1100)
}

// TestNamespacedKind: a namespaced kind is matched in the trigger's namespace only; under
// WhenUnmatched Delete the pipeline is owned by its object (without blocking its deletion).
func TestNamespacedKind(t *testing.T) {
	mine := triggertest.WebApp("ns", "shop", 0, nil)
	theirs := triggertest.WebApp("other", "shop", 0, nil)
	f := newFixture(t, objs(webAppTrigger(), newTemplate("web"), mine, theirs))
	f.sync("web")

	require.Len(t, f.pipelineList(), 1)
	p := f.pipelineFor("web", mine)
	assert.Equal(t, map[string]string{"image": "web:1", "name": "shop"}, p.Spec.Params)
	assert.Equal(t, "ns/shop", p.Annotations[v1alpha1.AnnotationObject])
	assert.Equal(t, v1alpha1.UpdateRerun, p.Spec.UpdatePolicy)
	assert.Equal(t, "deployer", p.Spec.ServiceAccountName)
	no := false
	assert.Equal(t, []metav1.OwnerReference{{
		APIVersion: "demo.stepwise.dev/v1alpha1", Kind: "WebApp", Name: "shop", UID: mine.GetUID(), BlockOwnerDeletion: &no,
	}}, p.OwnerReferences)
	got := f.trigger("web")
	assert.Equal(t, int32(1), got.Status.Matched)

	// Under Keep, no owner.
	f.updateTrigger("web", func(tr *v1alpha1.PipelineTrigger) { tr.Spec.WhenUnmatched = v1alpha1.UnmatchedKeep })
	f.createObject(triggertest.WebApp("ns", "blog", time.Second, nil))
	f.sync("web")
	blog := f.pipelineList()
	require.Len(t, blog, 2)
	for _, p := range blog {
		if p.Annotations[v1alpha1.AnnotationObject] == "ns/blog" {
			assert.Empty(t, p.OwnerReferences)
		}
	}
}

// TestObjectChanged: under Rerun, an object whose params change has its pipeline's params
// patched; under Immutable the pipeline is left alone and an Event says so, once.
func TestObjectChanged(t *testing.T) {
	shop := triggertest.WebApp("ns", "shop", 0, nil)
	f := newFixture(t, objs(webAppTrigger(), newTemplate("web"), shop))
	f.sync("web")
	f.events()

	unstructured.SetNestedField(shop.Object, "web:2", "spec", "image") //nolint:errcheck // a map
	f.updateObject(shop)
	f.client.ClearActions()
	f.sync("web")
	assert.Equal(t, []string{"patch pipelines"}, f.writes())
	assert.Equal(t, map[string]string{"image": "web:2", "name": "shop"}, f.pipelineFor("web", shop).Spec.Params)
	events := f.events()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], "Normal ObjectChanged ns/shop changed: pipeline")
	assert.Contains(t, events[0], "runs again with params.image changed")

	// Suspended: the re-run waits until the trigger is resumed.
	f.updateTrigger("web", func(tr *v1alpha1.PipelineTrigger) { tr.Spec.Suspend = true })
	unstructured.SetNestedField(shop.Object, "web:2b", "spec", "image") //nolint:errcheck // a map
	f.updateObject(shop)
	f.client.ClearActions()
	f.sync("web")
	assert.NotContains(t, f.writes(), "patch pipelines")
	f.updateTrigger("web", func(tr *v1alpha1.PipelineTrigger) { tr.Spec.Suspend = false })
	f.client.ClearActions()
	f.sync("web")
	assert.Contains(t, f.writes(), "patch pipelines")
	assert.Equal(t, "web:2b", f.pipelineFor("web", shop).Spec.Params["image"])
	f.events()
	unstructured.SetNestedField(shop.Object, "web:2", "spec", "image") //nolint:errcheck // a map
	f.updateObject(shop)
	f.sync("web")
	f.events()

	// A change of a field no param refers to changes nothing.
	unstructured.SetNestedField(shop.Object, int64(5), "spec", "replicas") //nolint:errcheck // a map
	f.updateObject(shop)
	f.client.ClearActions()
	f.sync("web")
	assert.Empty(t, f.writes())

	// Immutable: left alone, said once.
	f.updateTrigger("web", func(tr *v1alpha1.PipelineTrigger) { tr.Spec.UpdatePolicy = v1alpha1.UpdateImmutable })
	unstructured.SetNestedField(shop.Object, "web:3", "spec", "image") //nolint:errcheck // a map
	f.updateObject(shop)
	f.client.ClearActions()
	f.sync("web")
	f.sync("web")
	assert.Equal(t, []string{"update pipelinetriggers/status"}, f.writes(), "the new generation observed; the pipeline left alone")
	assert.Equal(t, "web:2", f.pipelineFor("web", shop).Spec.Params["image"])
	events = f.events()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], "Normal ObjectChanged ns/shop changed params.image, but pipeline")
	assert.Contains(t, events[0], "is immutable")
}

// TestPipelineCreatedImmutableStaysImmutable: a trigger switched to Rerun does not patch a
// pipeline created Immutable (the API server would refuse it).
func TestPipelineCreatedImmutableStaysImmutable(t *testing.T) {
	shop := triggertest.WebApp("ns", "shop", 0, nil)
	trig := webAppTrigger()
	trig.Spec.UpdatePolicy = v1alpha1.UpdateImmutable
	f := newFixture(t, objs(trig, newTemplate("web"), shop))
	f.sync("web")
	f.updateTrigger("web", func(tr *v1alpha1.PipelineTrigger) { tr.Spec.UpdatePolicy = v1alpha1.UpdateRerun })
	unstructured.SetNestedField(shop.Object, "web:2", "spec", "image") //nolint:errcheck // a map
	f.updateObject(shop)
	f.client.ClearActions()
	f.sync("web")
	assert.NotContains(t, f.writes(), "patch pipelines")
	assert.Equal(t, "web:1", f.pipelineFor("web", shop).Spec.Params["image"])
}

// TestObjectGoneOrUnmatched: under Delete the pipeline of an object that is gone, or no
// longer matches, is deleted (its teardown runs); under Keep it stays.
func TestObjectGoneOrUnmatched(t *testing.T) {
	tests := []struct {
		name       string
		policy     v1alpha1.UnmatchedPolicy
		unmatch    func(f *fixture, obj *unstructured.Unstructured)
		wantWrites []string
		wantEvent  string
	}{
		{name: "deleted, Delete", policy: v1alpha1.UnmatchedDelete, unmatch: (*fixture).deleteObject,
			wantWrites: []string{"delete pipelines", "update pipelinetriggers/status"}, wantEvent: "Normal PipelineDeleted n1 is gone: deleted pipeline"},
		{name: "unlabelled, Delete", policy: v1alpha1.UnmatchedDelete, unmatch: func(f *fixture, obj *unstructured.Unstructured) {
			obj.SetLabels(nil)
			f.updateObject(obj)
		}, wantWrites: []string{"delete pipelines", "update pipelinetriggers/status"}, wantEvent: "Normal PipelineDeleted n1 no longer matches: deleted pipeline"},
		{name: "deleted, Keep", policy: v1alpha1.UnmatchedKeep, unmatch: (*fixture).deleteObject,
			wantWrites: []string{"update pipelinetriggers/status"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n1 := triggertest.Node("n1", 0, retiring)
			trig := triggertest.Trigger()
			trig.Spec.WhenUnmatched = tt.policy
			f := newFixture(t, objs(trig, newTemplate("retire-node"), n1))
			f.sync("retire")
			f.events()
			name := rules.PipelineName("retire", "n1", n1.GetUID())

			tt.unmatch(f, n1)
			f.client.ClearActions()
			f.sync("retire")
			assert.Equal(t, tt.wantWrites, f.writes())
			events := f.events()
			if tt.wantEvent == "" {
				assert.Empty(t, events)
				assert.Equal(t, []string{name}, f.pipelineNames())
				return
			}
			require.Len(t, events, 1)
			assert.Contains(t, events[0], tt.wantEvent+" "+name)
			assert.Empty(t, f.pipelineNames())
			got := f.trigger("retire")
			assert.Zero(t, got.Status.Matched)
		})
	}
}

// TestPipelineBeingDeletedIsDeletedOnce: the cache that has not seen our deletion yet does
// not make us delete, and say so, again.
func TestPipelineBeingDeletedIsDeletedOnce(t *testing.T) {
	n1 := triggertest.Node("n1", 0, retiring)
	trig := triggertest.Trigger()
	trig.Spec.WhenUnmatched = v1alpha1.UnmatchedDelete
	f := newFixture(t, objs(trig, newTemplate("retire-node"), n1))
	f.sync("retire")
	f.events()
	f.deleteObject(n1)
	// The pipeline has a finalizer in a real cluster: it stays, being deleted.
	f.client.PrependReactor("delete", "pipelines", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil
	})
	f.client.ClearActions()
	f.sync("retire")
	f.sync("retire")
	assert.Equal(t, []string{"delete pipelines", "update pipelinetriggers/status"}, f.writes())
	assert.Len(t, f.events(), 1)
}

// TestHistoryLimit: under Keep, the finished pipelines of objects that are gone are kept up
// to historyLimit, the oldest deleted first; unfinished ones, and those of objects that
// still exist, are not counted.
func TestHistoryLimit(t *testing.T) {
	trig := triggertest.Trigger()
	trig.Spec.HistoryLimit = 2
	trig.Spec.Concurrency = 10
	var in []runtime.Object
	in = append(in, trig, newTemplate("retire-node"))
	var nodes []*unstructured.Unstructured
	for i, name := range []string{"a", "b", "c", "d", "running", "unlabelled"} {
		n := triggertest.Node(name, time.Duration(i)*time.Second, retiring)
		nodes = append(nodes, n)
		in = append(in, n)
	}
	f := newFixture(t, in)
	f.sync("retire")
	require.Len(t, f.pipelineList(), 6)

	// a, b, c, d and unlabelled finish, in the order d, a, c, b, unlabelled.
	for _, i := range []int{3, 0, 2, 1, 5} {
		f.clock.Step(time.Minute)
		f.finish("retire", nodes[i])
	}
	for _, n := range nodes[:5] {
		f.deleteObject(n)
	}
	nodes[5].SetLabels(nil)
	f.updateObject(nodes[5])
	f.events()
	f.client.ClearActions()
	f.sync("retire")

	deleted := f.events()
	require.Len(t, deleted, 2)
	assert.Contains(t, deleted[0], "PipelineDeleted history limit 2: deleted pipeline "+rules.PipelineName("retire", "d", nodes[3].GetUID()))
	assert.Contains(t, deleted[1], "deleted pipeline "+rules.PipelineName("retire", "a", nodes[0].GetUID()))
	assert.ElementsMatch(t, []string{
		rules.PipelineName("retire", "b", nodes[1].GetUID()), rules.PipelineName("retire", "c", nodes[2].GetUID()),
		rules.PipelineName("retire", "running", nodes[4].GetUID()), rules.PipelineName("retire", "unlabelled", nodes[5].GetUID()),
	}, f.pipelineNames())
}

// TestHistoryLimitWithAnArchiveRemovesByRetention: with archiving on, the pipelines past
// historyLimit are not deleted (which would tear them down) but given a retention of
// nothing: the engine removes each once the archive has its record, without a teardown.
func TestHistoryLimitWithAnArchiveRemovesByRetention(t *testing.T) {
	trig := triggertest.Trigger()
	trig.Spec.HistoryLimit = 1
	trig.Spec.Concurrency = 3
	var in []runtime.Object
	in = append(in, trig, newTemplate("retire-node"))
	var nodes []*unstructured.Unstructured
	for i, name := range []string{"a", "b", "c"} {
		n := triggertest.Node(name, time.Duration(i)*time.Second, retiring)
		nodes = append(nodes, n)
		in = append(in, n)
	}
	f := newFixture(t, in, func(c *Config) { c.Archiving = true })
	f.sync("retire")
	for _, n := range nodes {
		f.clock.Step(time.Minute)
		f.finish("retire", n)
		f.deleteObject(n)
	}
	f.events()
	f.client.ClearActions()
	f.sync("retire")
	f.sync("retire") // asked once: the second sync patches nothing

	events := f.events()
	require.Len(t, events, 2)
	assert.Contains(t, events[0], "history limit 1: pipeline "+rules.PipelineName("retire", "a", nodes[0].GetUID())+
		" of a, which is gone, is removed once archived, without a teardown")
	assert.Len(t, f.pipelineList(), 3, "nothing deleted: the engine removes them")
	for _, p := range f.pipelineList() {
		kept := p.Name == rules.PipelineName("retire", "c", nodes[2].GetUID())
		if kept {
			assert.Nil(t, p.Spec.Retention, "the newest is kept")
			continue
		}
		require.NotNil(t, p.Spec.Retention, p.Name)
		assert.Zero(t, p.Spec.Retention.AfterFinished.Duration, p.Name)
	}
	for _, a := range f.client.Actions() {
		assert.NotEqual(t, "delete", a.GetVerb(), "no pipeline is deleted")
	}
}

// TestRecreatedObjectGetsANewPipeline: an object deleted and created again under the same
// name is another object: it gets a pipeline of its own.
func TestRecreatedObjectGetsANewPipeline(t *testing.T) {
	n1 := triggertest.Node("n1", 0, retiring)
	trig := triggertest.Trigger()
	f := newFixture(t, objs(trig, newTemplate("retire-node"), n1))
	f.sync("retire")
	f.finish("retire", n1)
	f.deleteObject(n1)
	again := triggertest.Node("n1", time.Minute, retiring)
	again.SetUID("uid-n1-again")
	f.createObject(again)
	f.sync("retire")
	assert.ElementsMatch(t, []string{rules.PipelineName("retire", "n1", "uid-n1"), rules.PipelineName("retire", "n1", "uid-n1-again")}, f.pipelineNames())
}

// TestCreateRacingTheCache: a pipeline created by an earlier sync that the cache has not
// seen yet is neither created again nor counted out of the budget.
func TestCreateRacingTheCache(t *testing.T) {
	n1, n2 := triggertest.Node("n1", 0, retiring), triggertest.Node("n2", time.Second, retiring)
	f := newFixture(t, objs(triggertest.Trigger(), newTemplate("retire-node"), n1, n2))
	f.syncWithoutRefresh("retire")
	// No refresh: the informer has not delivered the pipeline.
	f.client.ClearActions()
	f.syncWithoutRefresh("retire")
	assert.NotContains(t, f.writes(), "create pipelines")
	assert.Len(t, f.pipelineList(), 1)
}

// TestAlreadyExists: a pipeline of that name made by an earlier life of the operator,
// which the cache has not seen, takes its place in the budget.
func TestAlreadyExists(t *testing.T) {
	n1, n2 := triggertest.Node("n1", 0, retiring), triggertest.Node("n2", time.Second, retiring)
	existing := &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: rules.PipelineName("retire", "n1", n1.GetUID()), Namespace: "ns"}}
	f := newFixture(t, objs(triggertest.Trigger(), newTemplate("retire-node"), n1, n2))
	require.NoError(t, f.client.Tracker().Add(existing))
	f.client.ClearActions()
	f.syncWithoutRefresh("retire")
	assert.Equal(t, []string{"create pipelines", "update pipelinetriggers/status"}, f.writes(), "n2 waits")
	assert.Equal(t, []string{"Normal Waiting"}, f.eventReasons(), "no PipelineCreated for a pipeline made before")
}

// TestLongTriggerName: a trigger whose name is too long for a label value still finds its
// pipelines.
func TestLongTriggerName(t *testing.T) {
	trig := triggertest.Trigger()
	trig.Name = "retire-a-very-long-trigger-name-that-does-not-fit-into-a-label-value-at-all"
	n1 := triggertest.Node("n1", 0, retiring)
	f := newFixture(t, objs(trig, newTemplate("retire-node"), n1))
	f.sync(trig.Name)
	p := f.pipelineList()
	require.Len(t, p, 1)
	assert.Equal(t, rules.LabelValueOf(trig.Name), p[0].Labels[v1alpha1.LabelTrigger])
	assert.LessOrEqual(t, len(p[0].Labels[v1alpha1.LabelTrigger]), 63)
	assert.NotEqual(t, trig.Name, p[0].Labels[v1alpha1.LabelTrigger])
	f.client.ClearActions()
	f.sync(trig.Name)
	assert.Empty(t, f.writes())
}

// TestBlockedByPodDisruptionBudgets: when every running pipeline waits on a
// PodDisruptionBudget and the other objects wait for them, the Ready message names the
// budgets.
func TestBlockedByPodDisruptionBudgets(t *testing.T) {
	var nodes []*unstructured.Unstructured
	in := objs(newTemplate("retire-node"))
	trig := triggertest.Trigger()
	trig.Spec.Concurrency = 3
	in = append(in, trig)
	for i := range 8 {
		n := triggertest.Node("n"+string(rune('0'+i)), time.Duration(i)*time.Second, retiring)
		nodes = append(nodes, n)
		in = append(in, n)
	}
	f := newFixture(t, in)
	f.sync("retire")
	block := func(i int, budgets ...string) {
		var blockedBy []v1alpha1.BlockingObject
		for _, b := range budgets {
			ns, name, _ := strings.Cut(b, "/")
			blockedBy = append(blockedBy, v1alpha1.BlockingObject{Kind: v1alpha1.KindPodDisruptionBudget, Namespace: ns, Name: name})
		}
		f.setPipelineStatus(rules.PipelineName("retire", nodes[i].GetName(), nodes[i].GetUID()), func(s *v1alpha1.PipelineStatus) {
			s.Phase = v1alpha1.PipelineRunning
			s.CurrentStep = "drain"
			s.Steps = []v1alpha1.StepStatus{{Name: "cordon", Message: "cordoned"}, {Name: "drain", Message: "pods left", BlockedBy: blockedBy}}
		})
	}
	block(0, "apps/web-pdb")
	block(1, "apps/web-pdb")
	block(2)
	f.sync("retire")
	assert.Equal(t, v1alpha1.TriggerReasonActive, readyOf(f.trigger("retire")).Reason, "one pipeline is not blocked")

	block(2, "db/db-pdb", "apps/web-pdb")
	f.sync("retire")
	ready := readyOf(f.trigger("retire"))
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	assert.Equal(t, v1alpha1.TriggerReasonBlocked, ready.Reason)
	assert.Equal(t, "3 running pipelines wait on PodDisruptionBudgets apps/web-pdb, db/db-pdb; 5 objects wait", ready.Message)
	var blockers []string
	for _, b := range f.trigger("retire").Status.BlockedBy {
		blockers = append(blockers, b.Kind+" "+b.Namespace+"/"+b.Name)
	}
	assert.Equal(t, []string{"PodDisruptionBudget apps/web-pdb", "PodDisruptionBudget db/db-pdb"}, blockers, "as data, not only in the message")
}

func TestBudgetsBlocking(t *testing.T) {
	pdb := func(ns, name string) v1alpha1.BlockingObject {
		return v1alpha1.BlockingObject{Kind: v1alpha1.KindPodDisruptionBudget, Namespace: ns, Name: name}
	}
	tests := []struct {
		name    string
		current string
		steps   []v1alpha1.StepStatus
		want    []v1alpha1.BlockingObject
	}{
		{name: "the drain's blockers", current: "drain", steps: []v1alpha1.StepStatus{{Name: "drain",
			BlockedBy: []v1alpha1.BlockingObject{pdb("apps", "web-pdb")}}}, want: []v1alpha1.BlockingObject{pdb("apps", "web-pdb")}},
		{name: "budgets once each, sorted", current: "drain", steps: []v1alpha1.StepStatus{{Name: "drain",
			BlockedBy: []v1alpha1.BlockingObject{pdb("b", "x"), pdb("a", "y"), pdb("b", "x")}}},
			want: []v1alpha1.BlockingObject{pdb("a", "y"), pdb("b", "x")}},
		{name: "other kinds are not budgets", current: "drain", steps: []v1alpha1.StepStatus{{Name: "drain",
			BlockedBy: []v1alpha1.BlockingObject{{Kind: "Node", Name: "n1"}}}}},
		{name: "a message naming a budget is only a message", current: "drain", steps: []v1alpha1.StepStatus{{Name: "drain",
			Message: "The disruption budget web-pdb needs 2 healthy pods and has 2 currently"}}},
		{name: "another step's blockers", current: "delete", steps: []v1alpha1.StepStatus{
			{Name: "drain", BlockedBy: []v1alpha1.BlockingObject{pdb("apps", "web-pdb")}}, {Name: "delete", Message: "deleting"}}},
		{name: "no current step", steps: []v1alpha1.StepStatus{{Name: "drain", BlockedBy: []v1alpha1.BlockingObject{pdb("apps", "web-pdb")}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &v1alpha1.Pipeline{Status: v1alpha1.PipelineStatus{Phase: v1alpha1.PipelineRunning, CurrentStep: tt.current, Steps: tt.steps}}
			assert.Equal(t, tt.want, budgetsBlocking(p))
		})
	}
}

// TestDeletedTriggerIsForgotten: a trigger that is gone no longer watches, nor keeps an
// answer of its rights.
func TestDeletedTriggerIsForgotten(t *testing.T) {
	f := newFixture(t, objs(triggertest.Trigger(), newTemplate("retire-node"), triggertest.Node("n1", 0, retiring)))
	f.sync("retire")
	require.NotZero(t, f.c.access.answers.Len())
	require.NoError(t, f.client.StepwiseV1alpha1().PipelineTriggers("ns").Delete(f.ctx, "retire", metav1.DeleteOptions{}))
	f.refresh()
	f.sync("retire")
	assert.Zero(t, f.c.access.answers.Len())
	assert.Empty(t, f.c.objects.WatchersOf(nodesGVR))
	assert.Len(t, f.pipelineList(), 1, "its pipelines stay")
}

// TestTriggerDeletedDuringItsSyncIsNoError: a trigger deleted while its sync ran (its
// status write answers NotFound) is gone, not a failed sync retried with backoff and
// logged as an error.
func TestTriggerDeletedDuringItsSyncIsNoError(t *testing.T) {
	f := newFixture(t, objs(triggertest.Trigger(), newTemplate("retire-node"), triggertest.Node("node-1", 0, retiring)))
	f.client.PrependReactor("update", "pipelinetriggers", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewNotFound(v1alpha1.Resource("pipelinetriggers"), "retire")
	})
	_, err := f.syncOnce(keyOf("retire"))
	require.NoError(t, err)
}

// TestTheStatusCountsPipelinesAwaitingApproval: a running pipeline whose step waits for a
// person is counted, so that whoever approves sees there is something to approve.
func TestTheStatusCountsPipelinesAwaitingApproval(t *testing.T) {
	n1 := triggertest.Node("node-1", 0, retiring)
	n2 := triggertest.Node("node-2", time.Second, retiring)
	trig := triggertest.Trigger()
	trig.Spec.Concurrency = 5
	f := newFixture(t, objs(trig, newTemplate("retire-node"), n1, n2))
	f.sync("retire")
	f.setPipelineStatus(f.pipelineFor("retire", n1).Name, func(s *v1alpha1.PipelineStatus) {
		s.Phase = v1alpha1.PipelineRunning
		s.Steps = []v1alpha1.StepStatus{{Name: "terminate", Phase: v1alpha1.StepAwaitingApproval,
			Approval: &v1alpha1.StepApproval{Request: "r1", Required: 1}}}
	})
	f.sync("retire")
	got := f.trigger("retire")
	assert.Equal(t, int32(2), got.Status.Running)
	assert.Equal(t, int32(1), got.Status.AwaitingApproval)
}
