package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/catalog"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
)

// listAnswer decodes GET /api/pipelines.
type listAnswer struct {
	Items      []pipelineSummary `json:"items"`
	Total      int               `json:"total"`
	Counts     map[string]int    `json:"counts"`
	Namespaces []string          `json:"namespaces"`
}

func names(items []pipelineSummary) []string {
	out := make([]string, 0, len(items))
	for _, i := range items {
		out = append(out, i.Namespace+"/"+i.Name)
	}
	return out
}

func TestListPipelines(t *testing.T) {
	objs := []runtime.Object{
		pipeline("ops", "alpha", v1alpha1.PipelineRunning, 1*time.Minute),
		pipeline("ops", "bravo", v1alpha1.PipelineFailed, 2*time.Minute, fromTemplate("retire-node"), byTrigger("retire")),
		pipeline("ops", "charlie", v1alpha1.PipelineSucceeded, 3*time.Minute, fromTemplate("retire-node")),
		pipeline("ops", "delta", "", 4*time.Minute), // no status yet: Pending
		pipeline("web", "alpha", v1alpha1.PipelineFailed, 5*time.Minute, byTrigger("retire")),
		pipeline("web", "echo", v1alpha1.PipelineSuspended, 6*time.Minute, func(p *v1alpha1.Pipeline) {
			p.Spec.Suspend = true
			p.Status.CurrentStep = "Drain-Node"
		}),
	}
	f := newFixture(t, fixtureOptions{objects: objs})
	zero := map[string]int{"Pending": 0, "Running": 0, "Succeeded": 0, "Failed": 0, "Suspended": 0, "Deleting": 0, "Planned": 0}
	allCounts := map[string]int{"Pending": 1, "Running": 1, "Succeeded": 1, "Failed": 2, "Suspended": 1, "Deleting": 0, "Planned": 0}
	opsCounts := map[string]int{"Pending": 1, "Running": 1, "Succeeded": 1, "Failed": 1, "Suspended": 0, "Deleting": 0, "Planned": 0}
	webCounts := map[string]int{"Pending": 0, "Running": 0, "Succeeded": 0, "Failed": 1, "Suspended": 1, "Deleting": 0, "Planned": 0}
	byName := []string{"ops/alpha", "web/alpha", "ops/bravo", "ops/charlie", "ops/delta", "web/echo"}
	for _, tc := range []struct {
		name, query string
		want        []string
		total       int
		counts      map[string]int // nil: allCounts
	}{
		{"all, by name then namespace", "", byName, 6, nil},
		{"one namespace: counts follow it", "namespace=ops", []string{"ops/alpha", "ops/bravo", "ops/charlie", "ops/delta"}, 4, opsCounts},
		{"a namespace without pipelines", "namespace=zzz", []string{}, 0, zero},
		{"phase: counts ignore it", "phase=Failed", []string{"web/alpha", "ops/bravo"}, 2, nil},
		{"phases", "phase=Failed,Suspended", []string{"web/alpha", "ops/bravo", "web/echo"}, 3, nil},
		{"Pending includes no status yet", "phase=Pending", []string{"ops/delta"}, 1, nil},
		{"template", "template=retire-node", []string{"ops/bravo", "ops/charlie"}, 2, nil},
		{"trigger", "trigger=retire", []string{"web/alpha", "ops/bravo"}, 2, nil},
		{"trigger and namespace", "trigger=retire&namespace=web", []string{"web/alpha"}, 1, webCounts},
		{"q matches a name, any case", "q=CHAR", []string{"ops/charlie"}, 1, nil},
		{"q matches a current step, any case", "q=drain-node", []string{"web/echo"}, 1, nil},
		{"q matches a template", "q=retire-n", []string{"ops/bravo", "ops/charlie"}, 2, nil},
		{"q matches a trigger", "q=retire&phase=Failed", []string{"web/alpha", "ops/bravo"}, 2, nil},
		{"q matches a namespace", "q=we", []string{"web/alpha", "web/echo"}, 2, nil},
		{"q matches nothing", "q=zzz", []string{}, 0, nil},
		{"sort name", "sort=name", byName, 6, nil},
		{"sort -name", "sort=-name", []string{"web/echo", "ops/delta", "ops/charlie", "ops/bravo", "web/alpha", "ops/alpha"}, 6, nil},
		{"sort age: newest first", "sort=age", []string{"web/echo", "web/alpha", "ops/delta", "ops/charlie", "ops/bravo", "ops/alpha"}, 6, nil},
		{"sort -age: oldest first", "sort=-age", []string{"ops/alpha", "ops/bravo", "ops/charlie", "ops/delta", "web/alpha", "web/echo"}, 6, nil},
		{"sort phase: failures first", "sort=phase", []string{"web/alpha", "ops/bravo", "ops/alpha", "web/echo", "ops/delta", "ops/charlie"}, 6, nil},
		{"sort -phase", "sort=-phase", []string{"ops/charlie", "ops/delta", "web/echo", "ops/alpha", "ops/bravo", "web/alpha"}, 6, nil},
		{"a page", "sort=-age&offset=2&limit=2", []string{"ops/charlie", "ops/delta"}, 6, nil},
		{"the last page", "offset=4&limit=100", []string{"ops/delta", "web/echo"}, 6, nil},
		{"past the end", "offset=10", []string{}, 6, nil},
		{"limit 0: counts only", "limit=0", []string{}, 6, nil},
		{"limit above the maximum is cut", "limit=100000", byName, 6, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := f.get("/api/pipelines?" + tc.query)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			got := decode[listAnswer](t, rec)
			assert.Equal(t, tc.want, names(got.Items))
			assert.Equal(t, tc.total, got.Total)
			want := tc.counts
			if want == nil {
				want = allCounts
			}
			assert.Equal(t, want, got.Counts)
			assert.Equal(t, []string{"ops", "web"}, got.Namespaces)
		})
	}

	t.Run("bad queries", func(t *testing.T) {
		for _, q := range []string{"sort=size", "limit=-1", "limit=ten", "offset=-5", "offset=1.5"} {
			rec := f.get("/api/pipelines?" + q)
			assert.Equal(t, http.StatusBadRequest, rec.Code, q)
			assert.NotEmpty(t, errorOf(t, rec), q)
		}
	})

	t.Run("a row", func(t *testing.T) {
		got := decode[listAnswer](t, f.get("/api/pipelines?namespace=ops&q=bravo"))
		require.Len(t, got.Items, 1)
		assert.Equal(t, pipelineSummary{
			Namespace: "ops", Name: "bravo", Phase: "Failed", CurrentStep: "build", Progress: "1/3",
			Template: "retire-node", Trigger: "retire", CreationTimestamp: decoded(2 * time.Minute),
			Steps: 0, Message: "step build failed: forbidden", Reason: v1alpha1.ReasonStepFailed, Failed: true,
		}, got.Items[0])
	})

	t.Run("the JSON shape", func(t *testing.T) {
		var raw map[string]any
		require.NoError(t, json.Unmarshal(f.get("/api/pipelines?limit=1").Body.Bytes(), &raw))
		item := raw["items"].([]any)[0].(map[string]any)
		for _, key := range []string{"namespace", "name", "phase", "currentStep", "progress", "template", "trigger",
			"creationTimestamp", "startTime", "completionTime", "steps", "message"} {
			assert.Contains(t, item, key)
		}
		assert.Equal(t, "2030-01-02T10:01:00Z", item["creationTimestamp"])
		assert.Nil(t, item["startTime"])
		assert.EqualValues(t, 3, item["steps"])
	})
}

// manyPipelines makes n pipelines in namespace "big", of five phases in turn; every tenth
// from a template tpl-0..2, every hundredth by trigger "trg".
func manyPipelines(n int) []runtime.Object {
	phases := []v1alpha1.PipelinePhase{v1alpha1.PipelineRunning, v1alpha1.PipelineSucceeded, v1alpha1.PipelineFailed,
		v1alpha1.PipelinePending, v1alpha1.PipelineSuspended}
	objs := make([]runtime.Object, 0, n)
	for i := range n {
		var mutate []func(*v1alpha1.Pipeline)
		if i%10 == 0 {
			mutate = append(mutate, fromTemplate(fmt.Sprintf("tpl-%d", i%3)))
		}
		if i%100 == 0 {
			mutate = append(mutate, byTrigger("trg"))
		}
		objs = append(objs, pipeline("big", fmt.Sprintf("pipeline-%05d", i), phases[i%len(phases)], time.Duration(i)*time.Second, mutate...))
	}
	return objs
}

func TestListPipelines10k(t *testing.T) {
	f := newFixture(t, fixtureOptions{objects: manyPipelines(10000)})

	rec := f.get("/api/pipelines?namespace=big&sort=age&offset=200&limit=100")
	require.Equal(t, http.StatusOK, rec.Code)
	got := decode[listAnswer](t, rec)
	assert.Equal(t, 10000, got.Total)
	require.Len(t, got.Items, 100, "one page, not the namespace")
	assert.Equal(t, "pipeline-09799", got.Items[0].Name, "newest first, from the 201st")
	assert.Equal(t, "pipeline-09700", got.Items[99].Name)
	assert.Equal(t, map[string]int{"Running": 2000, "Succeeded": 2000, "Failed": 2000, "Pending": 2000, "Suspended": 2000,
		"Deleting": 0, "Planned": 0}, got.Counts)
	assert.Less(t, rec.Body.Len(), 64<<10, "a page of 100 rows stays small")

	got = decode[listAnswer](t, f.get("/api/pipelines?phase=Failed&trigger=trg&limit=500"))
	assert.Equal(t, 0, got.Total, "every hundredth has the trigger, and is Running (i%5 == 0)")
	got = decode[listAnswer](t, f.get("/api/pipelines?phase=Running&trigger=trg&limit=500"))
	assert.Equal(t, 100, got.Total)
	assert.Len(t, got.Items, 100)

	got = decode[listAnswer](t, f.get("/api/pipelines?limit=500"))
	assert.Len(t, got.Items, 500, "the largest page")
}

// BenchmarkListPipelines10k measures one page of /api/pipelines over 10,000 cached
// pipelines, through the whole handler: checks, filter, sort, JSON.
func BenchmarkListPipelines10k(b *testing.B) {
	f := newFixture(b, fixtureOptions{objects: manyPipelines(10000)})
	for _, bc := range []struct{ name, query string }{
		{"first page by name", "limit=100"},
		{"newest first, page 20", "sort=age&offset=2000&limit=100"},
		{"by phase", "sort=phase&limit=100"},
		{"phase filter", "phase=Failed&limit=100"},
		{"text search", "q=pipeline-09&limit=100"},
		{"namespace and template", "namespace=big&template=tpl-1&limit=100"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec := f.get("/api/pipelines?" + bc.query)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body.String())
				}
			}
		})
	}
}

func TestGetPipeline(t *testing.T) {
	p := pipeline("ops", "bravo", v1alpha1.PipelineFailed, 0, func(p *v1alpha1.Pipeline) {
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	})
	uid := string(p.UID)
	otherGroup := event(kindPipeline, "ops", "bravo", uid, "TektonThing", 9*time.Second)
	otherGroup.InvolvedObject.APIVersion = "tekton.dev/v1"
	f := newFixture(t, fixtureOptions{
		objects: []runtime.Object{p, pipeline("ops", "other", v1alpha1.PipelineRunning, 0)},
		kube: []runtime.Object{
			event(kindPipeline, "ops", "bravo", uid, "StepStarted", 1*time.Second),
			event(kindPipeline, "ops", "bravo", uid, "StepFailed", 3*time.Second),
			event(kindPipeline, "ops", "bravo", "", "NoUID", 2*time.Second),
			event(kindPipeline, "ops", "bravo", "uid-of-an-earlier-bravo", "Earlier", 4*time.Second),
			event(kindPipeline, "ops", "other", "uid-ops-other", "OtherPipeline", 5*time.Second),
			event(kindTrigger, "ops", "bravo", "uid-trigger", "TriggerOfTheSameName", 6*time.Second),
			otherGroup,
		},
	})

	rec := f.get("/api/pipelines/ops/bravo")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var got struct {
		Pipeline map[string]any `json:"pipeline"`
		Events   []eventSummary `json:"events"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	assert.Equal(t, "stepwise.dev/v1alpha1", got.Pipeline["apiVersion"])
	assert.Equal(t, "Pipeline", got.Pipeline["kind"])
	metadata := got.Pipeline["metadata"].(map[string]any)
	assert.Equal(t, "bravo", metadata["name"])
	assert.NotContains(t, metadata, "managedFields")
	assert.Equal(t, "Failed", got.Pipeline["status"].(map[string]any)["phase"])

	reasons := make([]string, 0, len(got.Events))
	for _, e := range got.Events {
		reasons = append(reasons, e.Reason)
	}
	assert.Equal(t, []string{"StepFailed", "NoUID", "StepStarted"}, reasons, "newest first; only this pipeline's")
	assert.Equal(t, eventSummary{
		Type: "Normal", Reason: "StepFailed", Message: "StepFailed of bravo", Count: 2,
		FirstTimestamp: decoded(0), LastTimestamp: decoded(3 * time.Second),
	}, got.Events[0])

	t.Run("absent", func(t *testing.T) {
		rec := f.get("/api/pipelines/ops/nope")
		assert.Equal(t, http.StatusNotFound, rec.Code)
		assert.Equal(t, "pipeline ops/nope not found", errorOf(t, rec))
	})
	t.Run("another's events", func(t *testing.T) {
		detail := decode[objectDetail](t, f.get("/api/pipelines/ops/other"))
		require.Len(t, detail.Events, 1)
		assert.Equal(t, "OtherPipeline", detail.Events[0].Reason)
	})
	t.Run("the cache is not written to", func(t *testing.T) {
		cached, err := f.server.caches.pipelineLister.Pipelines("ops").Get("bravo")
		require.NoError(t, err)
		assert.Empty(t, cached.Kind)
	})
}

func TestNamespacedDashboard(t *testing.T) {
	f := newFixture(t, fixtureOptions{
		namespace: "ops",
		objects: []runtime.Object{
			pipeline("ops", "alpha", v1alpha1.PipelineRunning, 0),
			pipeline("web", "alpha", v1alpha1.PipelineFailed, 0),
		},
	})
	got := decode[listAnswer](t, f.get("/api/pipelines"))
	assert.Equal(t, []string{"ops/alpha"}, names(got.Items))
	assert.Equal(t, []string{"ops"}, got.Namespaces)

	assert.Equal(t, http.StatusNotFound, f.get("/api/pipelines/web/alpha").Code)
	rec := f.serve(request(http.MethodPost, "/api/pipelines/web/alpha/suspend", nil))
	assert.Equal(t, http.StatusNotFound, rec.Code)
	assert.Contains(t, errorOf(t, rec), "outside this dashboard's namespace ops")

	for _, a := range f.client.Actions() {
		assert.Equal(t, "ops", a.GetNamespace(), "%s %s", a.GetVerb(), a.GetResource().Resource)
	}
	for _, a := range f.kube.Actions() {
		assert.Equal(t, "ops", a.GetNamespace(), "%s %s", a.GetVerb(), a.GetResource().Resource)
	}

	var info struct {
		Namespace string                    `json:"namespace"`
		Resources map[string]resourceAccess `json:"resources"`
	}
	require.NoError(t, json.Unmarshal(f.get("/api/info").Body.Bytes(), &info))
	assert.Equal(t, "ops", info.Namespace)
	assert.True(t, info.Resources["pipelines"].Allowed)
}

// reactor is what forbid needs of a fake clientset.
type reactor interface {
	PrependReactor(verb, resource string, reaction k8stesting.ReactionFunc)
}

// forbid makes every list of resource fail as the API server refuses it.
func forbid(client reactor, group, resource string) {
	client.PrependReactor("list", resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: group, Resource: resource}, "",
			errors.New(`User "bob" cannot list resource "`+resource+`" in API group "`+group+`" in the namespace "ops"`))
	})
}

func TestForbiddenResource(t *testing.T) {
	f := newFixture(t, fixtureOptions{
		objects: []runtime.Object{pipeline("ops", "alpha", v1alpha1.PipelineRunning, 0),
			&v1alpha1.PipelineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "tpl"}}},
		setup: func(client *fake.Clientset, kube *kubefake.Clientset) {
			forbid(client, "stepwise.dev", "pipelines")
			forbid(kube, "", "events")
		},
	})
	rec := f.get("/api/pipelines")
	assert.Equal(t, http.StatusForbidden, rec.Code)
	assert.Equal(t, `pipelines.stepwise.dev is forbidden: User "bob" cannot list resource "pipelines" in API group "stepwise.dev" in the namespace "ops"`,
		errorOf(t, rec), "the API server's message")
	assert.Equal(t, http.StatusForbidden, f.get("/api/pipelines/ops/alpha").Code)

	rec = f.get("/api/templates")
	assert.Equal(t, http.StatusOK, rec.Code, "the other resources are unaffected")
	assert.Contains(t, rec.Body.String(), `"name":"tpl"`)

	var info struct {
		Resources map[string]resourceAccess `json:"resources"`
	}
	require.NoError(t, json.Unmarshal(f.get("/api/info").Body.Bytes(), &info))
	assert.False(t, info.Resources["pipelines"].Allowed)
	assert.Contains(t, info.Resources["pipelines"].Error, "forbidden")
	assert.True(t, info.Resources["templates"].Allowed)
	assert.False(t, info.Resources["pipelineEvents"].Allowed)

	listsOfPipelines := 0
	for _, a := range f.client.Actions() {
		if a.GetResource().Resource == "pipelines" {
			assert.Equal(t, "list", a.GetVerb(), "no informer, no watch")
			listsOfPipelines++
		}
	}
	assert.Equal(t, 1, listsOfPipelines, "one probe, no retry loop")
}

func TestForbiddenEventsLeaveTheDetail(t *testing.T) {
	f := newFixture(t, fixtureOptions{
		objects: []runtime.Object{pipeline("ops", "alpha", v1alpha1.PipelineRunning, 0)},
		setup:   func(_ *fake.Clientset, kube *kubefake.Clientset) { forbid(kube, "", "events") },
	})
	rec := f.get("/api/pipelines/ops/alpha")
	require.Equal(t, http.StatusOK, rec.Code)
	got := decode[objectDetail](t, rec)
	assert.Empty(t, got.Events)
	assert.Contains(t, rec.Body.String(), `"events":[]`)
	assert.Contains(t, got.EventsError, "cannot list")
}

func TestRunError(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "pipelinetemplates", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(v1alpha1.Resource("pipelinetemplates"), "")
	})
	s, err := New(t.Context(), Config{Stepwise: client, Kube: kubefake.NewClientset(), Token: testToken, Assets: testAssets()})
	require.NoError(t, err)
	err = s.Run(t.Context())
	require.ErrorContains(t, err, "list pipelinetemplates")
	assert.True(t, apierrors.IsNotFound(err), "wrapped")

	f := &fixture{server: s}
	rec := f.get("/api/pipelines")
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, errorOf(t, rec), "cannot read from the cluster")
	assert.ErrorContains(t, s.Run(t.Context()), "already")
}

func TestListTemplates(t *testing.T) {
	def := "30s"
	f := newFixture(t, fixtureOptions{objects: []runtime.Object{
		&v1alpha1.PipelineTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "retire-node"},
			Spec: v1alpha1.PipelineTemplateSpec{
				Params: []v1alpha1.TemplateParam{
					{Name: "node", Required: true, Description: "The <node>."},
					{Name: "grace", Default: &def},
				},
				Steps: []v1alpha1.Step{{Name: "cordon", Executor: "node.cordon"}, {Name: "drain", Executor: "node.drain"}},
			},
		},
		&v1alpha1.PipelineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "empty"}},
		&v1alpha1.PipelineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "deploy"}},
	}})
	type answer struct {
		Items []templateSummary `json:"items"`
	}
	rec := f.get("/api/templates")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), `"description":"The \u003cnode\u003e."`, "HTML-escaped JSON")
	assert.Contains(t, rec.Body.String(), `"params":[]`, "empty lists, not null")
	assert.Contains(t, rec.Body.String(), `{"name":"node","required":true,"default":null`)
	got := decode[answer](t, rec)
	require.Len(t, got.Items, 3)
	var keys []string
	for _, i := range got.Items {
		keys = append(keys, i.Namespace+"/"+i.Name)
	}
	assert.Equal(t, []string{"ops/empty", "ops/retire-node", "web/deploy"}, keys)
	assert.Equal(t, []templateParam{{Name: "node", Required: true, Description: "The <node>."}, {Name: "grace", Default: &def}},
		got.Items[1].Params)
	assert.Equal(t, []templateStep{{Name: "cordon", Executor: "node.cordon"}, {Name: "drain", Executor: "node.drain"}}, got.Items[1].Steps)

	got = decode[answer](t, f.get("/api/templates?namespace=web"))
	require.Len(t, got.Items, 1)
	assert.Equal(t, "deploy", got.Items[0].Name)
}

func TestTriggers(t *testing.T) {
	trigger := &v1alpha1.PipelineTrigger{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "retire", UID: "uid-trigger"},
		Spec: v1alpha1.PipelineTriggerSpec{
			Resource:    v1alpha1.TriggerResource{APIVersion: "v1", Kind: "Node"},
			TemplateRef: v1alpha1.TemplateRef{Name: "retire-node"},
			Concurrency: 2,
		},
		Status: v1alpha1.PipelineTriggerStatus{
			Matched: 5, Running: 2, Waiting: 2, Succeeded: 1, Queue: []string{"node-4", "node-5"},
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready", Message: "watching 5 Nodes"}},
		},
	}
	f := newFixture(t, fixtureOptions{
		objects: []runtime.Object{trigger, &v1alpha1.PipelineTrigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "new"}}},
		kube:    []runtime.Object{event(kindTrigger, "ops", "retire", "uid-trigger", "PipelineCreated", time.Second)},
	})
	rec := f.get("/api/triggers")
	require.Equal(t, http.StatusOK, rec.Code)
	got := decode[struct {
		Items []triggerSummary `json:"items"`
	}](t, rec)
	require.Len(t, got.Items, 2)
	assert.Equal(t, triggerSummary{Namespace: "ops", Name: "new", Concurrency: 1, Queue: []string{},
		Ready: conditionSummary{Status: "Unknown"}, FailureBudget: 1}, got.Items[0], "the failure budget's default")
	assert.Equal(t, triggerSummary{
		Namespace: "ops", Name: "retire", Resource: triggerResource{APIVersion: "v1", Kind: "Node"},
		Template: "retire-node", Concurrency: 2, Matched: 5, Running: 2, Waiting: 2, Succeeded: 1,
		Queue: []string{"node-4", "node-5"}, Ready: conditionSummary{Status: "True", Reason: "Ready", Message: "watching 5 Nodes"},
		FailureBudget: 1,
	}, got.Items[1])

	rec = f.get("/api/triggers/ops/retire")
	require.Equal(t, http.StatusOK, rec.Code)
	detail := decode[objectDetail](t, rec)
	require.NotNil(t, detail.Trigger)
	assert.Equal(t, "PipelineTrigger", detail.Trigger.Kind)
	require.Len(t, detail.Events, 1)
	assert.Equal(t, "PipelineCreated", detail.Events[0].Reason)
	assert.Nil(t, detail.Pipeline)
	assert.Equal(t, http.StatusNotFound, f.get("/api/triggers/ops/nope").Code)
}

func TestExecutors(t *testing.T) {
	cat := catalog.Catalog{OperatorVersion: "v0.3.0", Executors: []catalog.Entry{
		{Name: "node.cordon", Description: contract.Description{Version: "v0.3.0", Description: "Cordons a node.",
			Parameters: []contract.Parameter{{Name: "node", Required: true, Type: contract.ParamString}}}},
		{Name: "vsphere.terminate-vm", Description: contract.Description{Version: "v1.2.0", Plugin: "stepwise-plugin-vsphere"}},
	}}
	data, err := json.Marshal(cat)
	require.NoError(t, err)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: catalog.DefaultNamespace, Name: catalog.DefaultName},
		Data:       map[string]string{catalog.DataKey: string(data)},
	}
	f := newFixture(t, fixtureOptions{kube: []runtime.Object{cm}})
	rec := f.get("/api/executors")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	got := decode[struct {
		Items           []executorSummary `json:"items"`
		OperatorVersion string            `json:"operatorVersion"`
	}](t, rec)
	assert.Equal(t, "v0.3.0", got.OperatorVersion)
	assert.Equal(t, []executorSummary{
		{Name: "node.cordon", Version: "v0.3.0", Description: "Cordons a node.",
			Parameters: []contract.Parameter{{Name: "node", Required: true, Type: contract.ParamString}}},
		{Name: "vsphere.terminate-vm", Version: "v1.2.0", Plugin: "stepwise-plugin-vsphere", Parameters: []contract.Parameter{}},
	}, got.Items)

	t.Run("no catalogue", func(t *testing.T) {
		require.NoError(t, f.kube.CoreV1().ConfigMaps(catalog.DefaultNamespace).Delete(t.Context(), catalog.DefaultName, metav1.DeleteOptions{}))
		rec := f.get("/api/executors")
		assert.Equal(t, http.StatusNotFound, rec.Code)
		assert.Contains(t, errorOf(t, rec), "stepwise-executors")
	})
}
