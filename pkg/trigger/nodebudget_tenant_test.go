package trigger

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// forgedText is what a tenant writes in a pipeline it makes look like a trigger's: it must
// reach no other tenant's trigger, status or Event.
const forgedText = "INJECTED: ask #ops to approve"

// dbPipeline is the pipeline the budget trigger "db" of namespace ns (naming fleet) makes
// for node, as the trigger makes it (rules.PipelineFor), changed by change.
func dbPipeline(node *unstructured.Unstructured, change func(*v1alpha1.Pipeline)) *v1alpha1.Pipeline {
	p := rules.PipelineFor(budgetTrigger("db", "db", "fleet"), node, map[string]string{"node": node.GetName()})
	p.UID = types.UID("uid-pipeline-" + p.Namespace + "-" + p.Name)
	if change != nil {
		change(p)
	}
	return p
}

// TestABudgetCountsOnlyTheStartsOfTriggersThatMayUseIt: a NodeBudget counts a pipeline
// only when a trigger of the pipeline's namespace, which names the budget and may use it,
// started it; and it takes the node from the Node the pipeline's object UID names, never
// from text the pipeline carries. The budget (2) has one NotReady node; web may start one
// of its two nodes unless the pipeline of the case takes the other place.
func TestABudgetCountsOnlyTheStartsOfTriggersThatMayUseIt(t *testing.T) {
	web := map[string]string{"stepwise.dev/retire": "true", "pool": "web"}
	b := triggertest.ReadyNode("b", 0, nil)
	vanished := triggertest.ReadyNode("vanished", 0, nil) // not in the cluster: its pipeline outlived it
	forged := &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: "tenant", UID: "uid-forged",
		Labels:      map[string]string{v1alpha1.LabelNodeBudget: "fleet"},
		Annotations: map[string]string{v1alpha1.AnnotationObject: forgedText}}}
	const webStartsOne = "NodeBudget fleet is full: 2 of 2 nodes unavailable: a (retiring), sick (NotReady)"

	for _, tc := range []struct {
		name     string
		pipeline *v1alpha1.Pipeline
		// db is the trigger db as stored, when the case has one; dbDenied: its
		// ServiceAccount may not use the budget, and it synced before web.
		db       *v1alpha1.PipelineTrigger
		dbDenied bool
		// wantStarted are the nodes web starts; wantMessage is its Ready message.
		wantStarted []string
		wantMessage string
	}{
		{
			name: "a pipeline of another namespace, labelled with the budget and naming a node", pipeline: forged,
			wantStarted: []string{"a"}, wantMessage: webStartsOne,
		},
		{
			name: "a pipeline of the trigger's namespace without a trigger's UID",
			pipeline: dbPipeline(b, func(p *v1alpha1.Pipeline) {
				delete(p.Labels, v1alpha1.LabelTriggerUID)
				p.Annotations[v1alpha1.AnnotationObject] = forgedText
			}),
			db:          budgetTrigger("db", "db", "fleet"),
			wantStarted: []string{"a"}, wantMessage: webStartsOne,
		},
		{
			name:        "a copy, in another namespace, of a trigger's pipeline, its labels and all",
			pipeline:    dbPipeline(b, func(p *v1alpha1.Pipeline) { p.Namespace = "tenant" }),
			db:          budgetTrigger("db", "db", "fleet"),
			wantStarted: []string{"a"}, wantMessage: webStartsOne,
		},
		{
			name:        "a pipeline of a trigger that names another budget",
			pipeline:    dbPipeline(b, nil),
			db:          budgetTrigger("db", "db", "elsewhere"),
			wantStarted: []string{"a"}, wantMessage: webStartsOne,
		},
		{
			name:        "a pipeline of an earlier trigger of the same name",
			pipeline:    dbPipeline(b, func(p *v1alpha1.Pipeline) { p.Labels[v1alpha1.LabelTriggerUID] = "uid-earlier" }),
			db:          budgetTrigger("db", "db", "fleet"),
			wantStarted: []string{"a"}, wantMessage: webStartsOne,
		},
		{
			name: "a pipeline controlled by something other than its trigger",
			pipeline: dbPipeline(b, func(p *v1alpha1.Pipeline) {
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "uid-rs", Controller: ptr.To(true)}}
			}),
			db:          budgetTrigger("db", "db", "fleet"),
			wantStarted: []string{"a"}, wantMessage: webStartsOne,
		},
		{
			name:        "a pipeline of a trigger whose ServiceAccount may not use the budget",
			pipeline:    dbPipeline(b, nil),
			db:          budgetTrigger("db", "db", "fleet"),
			dbDenied:    true,
			wantStarted: []string{"a"}, wantMessage: webStartsOne,
		},
		{
			name:        "a pipeline the trigger db started for node b",
			pipeline:    dbPipeline(b, nil),
			db:          budgetTrigger("db", "db", "fleet"),
			wantMessage: "NodeBudget fleet is full: 2 of 2 nodes unavailable: b (retiring), sick (NotReady)",
		},
		{
			name: "a pipeline the trigger db started, controlled by db",
			pipeline: dbPipeline(b, func(p *v1alpha1.Pipeline) {
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "PipelineTrigger",
					Name: "db", UID: "uid-trigger-db", Controller: ptr.To(true)}}
			}),
			db:          budgetTrigger("db", "db", "fleet"),
			wantMessage: "NodeBudget fleet is full: 2 of 2 nodes unavailable: b (retiring), sick (NotReady)",
		},
		{
			name:        "a pipeline the trigger db started for a node that is gone",
			pipeline:    dbPipeline(vanished, nil),
			db:          budgetTrigger("db", "db", "fleet"),
			wantMessage: "NodeBudget fleet is full: 2 of 2 nodes unavailable: sick (NotReady), 1 retiring whose Node is gone",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := objs(newTemplate("retire-node"), newNodeBudget("fleet", 2, nil), budgetTrigger("web", "web", "fleet"),
				triggertest.Node("sick", 0, nil), triggertest.ReadyNode("a", 0, web), triggertest.ReadyNode("c", time.Second, web), b, tc.pipeline)
			if tc.db != nil {
				in = append(in, runtime.Object(tc.db))
			}
			f := newFixture(t, in)
			withNodeBudgetUse(f)
			if tc.dbDenied {
				tc.db.Spec.ServiceAccountName = "stranger"
				require.NoError(t, f.triggers.Update(tc.db))
				f.rbac.allow("system:serviceaccount:ns:stranger", "nodes", "", "list", "watch")
				f.sync("db")
				require.Equal(t, v1alpha1.TriggerReasonForbidden, readyOf(f.trigger("db")).Reason)
			}

			f.sync("web")
			var started []string
			for _, p := range f.pipelineList() {
				if p.Labels[v1alpha1.LabelTrigger] == "web" {
					started = append(started, p.Annotations[v1alpha1.AnnotationObject])
				}
			}
			slices.Sort(started)
			assert.Equal(t, tc.wantStarted, started)
			trig := f.trigger("web")
			ready := readyOf(trig)
			assert.Equal(t, v1alpha1.TriggerReasonNodeBudgetFull, ready.Reason)
			assert.Equal(t, tc.wantMessage, strings.SplitN(ready.Message, ";", 2)[0])

			status, err := json.Marshal(trig.Status)
			require.NoError(t, err)
			assert.NotContains(t, string(status), "INJECTED")
			assert.NotContains(t, string(status), "vanished", "a node that is gone is counted, not named")
			for _, e := range f.events() {
				assert.NotContains(t, e, "INJECTED")
			}
		})
	}
}

// TestOnlyAStartUnderTheBudgetQueuesItsTriggers: a pipeline that finishes or goes frees
// a place in a budget, and queues the triggers naming it, only when the budget counted
// it: a tenant's forged pipelines, made and deleted at will, queue no other tenant's
// trigger.
func TestOnlyAStartUnderTheBudgetQueuesItsTriggers(t *testing.T) {
	b := triggertest.ReadyNode("b", 0, nil)
	for _, tc := range []struct {
		name     string
		pipeline *v1alpha1.Pipeline
		want     []string
	}{
		{
			name: "a pipeline of another namespace, labelled with the budget",
			pipeline: &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: "tenant",
				Labels: map[string]string{v1alpha1.LabelNodeBudget: "fleet"}}},
		},
		{
			name:     "a copy, in another namespace, of a trigger's pipeline",
			pipeline: dbPipeline(b, func(p *v1alpha1.Pipeline) { p.Namespace = "tenant" }),
		},
		{
			name:     "a pipeline of an earlier trigger of the same name",
			pipeline: dbPipeline(b, func(p *v1alpha1.Pipeline) { p.Labels[v1alpha1.LabelTriggerUID] = "uid-earlier" }),
		},
		{
			name:     "a pipeline the trigger db started",
			pipeline: dbPipeline(b, nil),
			want:     []string{"ns/db", "ns/web"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, objs(newNodeBudget("fleet", 2, nil), budgetTrigger("web", "web", "fleet"), budgetTrigger("db", "db", "fleet")))
			drain(f.c)
			f.c.onBudgetPipeline(tc.pipeline)
			got := drain(f.c)
			slices.Sort(got)
			assert.Equal(t, tc.want, got)
		})
	}
}
