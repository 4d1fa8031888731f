package trigger

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clienttesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
)

// serviceAccountDynamic gives the fixture's dynamic client as any ServiceAccount's, and
// records whose it was asked for.
type serviceAccountDynamic struct {
	f  *fixture
	as []string
}

func (s *serviceAccountDynamic) ForServiceAccount(namespace, name string) (*executor.Clients, error) {
	s.as = append(s.as, namespace+"/"+name)
	return &executor.Clients{Dynamic: s.f.dynamic, Mapper: testMapper()}, nil
}

// webReady95 holds while at least 95 % of the Nodes labelled pool=web are Ready.
func webReady95(deadline time.Duration) v1alpha1.HealthGate {
	g := v1alpha1.HealthGate{Name: "web-ready", Objects: &v1alpha1.ObjectsGate{
		Resource:  v1alpha1.TriggerResource{APIVersion: "v1", Kind: "Node"},
		Selector:  &v1alpha1.LabelSelector{MatchLabels: map[string]string{"pool": "web"}},
		Condition: `objects.filter(n, has(n.status) && n.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')).size() * 100 >= objects.size() * 95`,
	}}
	if deadline > 0 {
		g.Deadline = &metav1.Duration{Duration: deadline}
	}
	return g
}

// gateFixture: a trigger with the gate, one node to retire, and 20 web nodes, sick of
// which are NotReady.
func gateFixture(t *testing.T, gate v1alpha1.HealthGate, sick int) (*fixture, *serviceAccountDynamic, []*unstructured.Unstructured) {
	trig := triggertest.Trigger()
	trig.Spec.Gates = []v1alpha1.HealthGate{gate}
	in := objs(newTemplate("retire-node"), trig, triggertest.ReadyNode("old", 0, retiring))
	var web []*unstructured.Unstructured
	for i := range 20 {
		n := triggertest.ReadyNode(fmt.Sprintf("web-%02d", i), 0, map[string]string{"pool": "web"})
		if i < sick {
			triggertest.SetReady(n, "False")
		}
		web = append(web, n)
		in = append(in, n)
	}
	f := newFixture(t, in)
	sa := &serviceAccountDynamic{f: f}
	f.c.clients = sa
	return f, sa, web
}

func lists(f *fixture) int {
	n := 0
	for _, a := range f.dynamic.Actions() {
		if a.GetVerb() == "list" && a.(clienttesting.ListAction).GetListRestrictions().Labels.String() == "pool=web" {
			n++
		}
	}
	return n
}

// TestAGateThatDoesNotHoldStartsNothing: 2 of 20 web nodes NotReady (90 %) close the
// gate: nothing starts, Ready and status.gates say which gate and why, the gate is not
// listed again before gateRecheck (whatever events come), and once 19 of 20 are Ready the
// next check starts the pipeline.
func TestAGateThatDoesNotHoldStartsNothing(t *testing.T) {
	f, sa, web := gateFixture(t, webReady95(0), 2)
	requeue := f.sync("retire")
	assert.Empty(t, f.pipelineList())
	assert.LessOrEqual(t, requeue, gateRecheck)
	got := f.trigger("retire")
	ready := readyOf(got)
	assert.Equal(t, v1alpha1.TriggerReasonGateClosed, ready.Reason)
	assert.Contains(t, ready.Message, "gate web-ready does not hold since ")
	assert.Contains(t, ready.Message, "the condition is false over 20 nodes")
	require.Len(t, got.Status.Gates, 1)
	assert.False(t, got.Status.Gates[0].Holds)
	assert.Equal(t, []string{"ns/retirer"}, sa.as, "listed as the trigger's ServiceAccount")
	require.Len(t, got.Status.BlockedBy, 1)
	assert.Equal(t, v1alpha1.BlockerGate, got.Status.BlockedBy[0].Kind)
	assert.Equal(t, "web-ready", got.Status.BlockedBy[0].Name)
	assert.Contains(t, got.Status.BlockedBy[0].Unblock, "the condition is false over 20 nodes")
	assert.Equal(t, &got.Status.Gates[0].Since, got.Status.BlockedBy[0].Since, "since the gate stopped holding")
	assert.Equal(t, 1, lists(f))

	f.clock.Step(gateRecheck / 2)
	f.sync("retire")
	assert.Equal(t, 1, lists(f), "not listed again before gateRecheck")

	triggertest.SetReady(web[0], "True")
	f.updateObject(web[0])
	f.clock.Step(gateRecheck / 2)
	f.sync("retire")
	assert.Len(t, f.pipelineList(), 1, "19 of 20 Ready: the gate holds")
	got = f.trigger("retire")
	assert.True(t, got.Status.Gates[0].Holds)
	assert.Equal(t, f.clock.Now().Unix(), got.Status.Gates[0].Since.Unix())
}

// TestAGateClosedPastItsDeadlineStopsTheTrigger: it stops as a spent failure budget does,
// stays stopped when the gate holds again, and a resume starts it.
func TestAGateClosedPastItsDeadlineStopsTheTrigger(t *testing.T) {
	f, _, web := gateFixture(t, webReady95(time.Minute), 2)
	f.sync("retire")
	f.clock.Step(61 * time.Second)
	f.sync("retire")
	got := f.trigger("retire")
	ready := readyOf(got)
	assert.Equal(t, "False/"+v1alpha1.TriggerReasonGateDeadlineExceeded, string(ready.Status)+"/"+ready.Reason)
	require.NotNil(t, got.Status.GateStop)
	assert.Equal(t, "web-ready", got.Status.GateStop.Gate)
	assert.Contains(t, f.events(), "Warning GateDeadlineExceeded gate web-ready has not held for 1m1s (deadline 1m0s): the condition is false over 20 nodes; nothing starts until a person resumes the trigger")

	triggertest.SetReady(web[0], "True")
	triggertest.SetReady(web[1], "True")
	f.updateObject(web[0])
	f.updateObject(web[1])
	f.clock.Step(gateRecheck)
	f.sync("retire")
	assert.Empty(t, f.pipelineList(), "stopped until resumed, though the gate holds")

	f.updateTrigger("retire", func(tr *v1alpha1.PipelineTrigger) {
		tr.Spec.Resume = &v1alpha1.TriggerResume{By: "alice", ID: "1"}
		tr.Generation++
	})
	f.sync("retire")
	assert.Len(t, f.pipelineList(), 1)
	assert.Nil(t, f.trigger("retire").Status.GateStop)
}

// TestAPrometheusGateHoldsWhileTheQueryReturnsNothing: a firing alert closes it, and the
// message names the series.
func TestAPrometheusGateHoldsWhileTheQueryReturnsNothing(t *testing.T) {
	var firing atomic.Bool
	firing.Store(true)
	var queries atomic.Int32
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries.Add(1)
		w.Header().Set("Content-Type", "application/json")
		result := `[]`
		if firing.Load() {
			result = `[{"metric":{"__name__":"ALERTS","alertname":"NodeDown","alertstate":"firing"},"value":[1700000000,"1"]}]`
		}
		_, _ = fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":%s}}`, result)
	}))
	t.Cleanup(prom.Close)
	trig := triggertest.Trigger()
	trig.Spec.Gates = []v1alpha1.HealthGate{{Name: "no-alerts", Prometheus: &v1alpha1.PrometheusGate{
		URL: prom.URL, Query: `ALERTS{alertname="NodeDown",alertstate="firing"}`}}}
	f := newFixture(t, objs(newTemplate("retire-node"), trig, triggertest.ReadyNode("old", 0, retiring)))
	f.c.gateHTTP = prom.Client()

	f.sync("retire")
	assert.Empty(t, f.pipelineList())
	ready := readyOf(f.trigger("retire"))
	assert.Equal(t, v1alpha1.TriggerReasonGateClosed, ready.Reason)
	assert.Contains(t, ready.Message, `the query returns 1 series, first ALERTS{alertname="NodeDown", alertstate="firing"}`)

	firing.Store(false)
	f.clock.Step(gateRecheck)
	f.sync("retire")
	assert.Len(t, f.pipelineList(), 1)
	assert.Equal(t, int32(2), queries.Load())
}

// TestGatesAreNotCheckedWithNothingToStart: a trigger with nothing waiting makes no query.
func TestGatesAreNotCheckedWithNothingToStart(t *testing.T) {
	f, sa, _ := gateFixture(t, webReady95(0), 0)
	f.updateTrigger("retire", func(tr *v1alpha1.PipelineTrigger) { tr.Spec.Selector.MatchLabels = map[string]string{"none": "x"} })
	f.sync("retire")
	assert.Empty(t, sa.as)
	assert.Equal(t, v1alpha1.TriggerReasonActive, readyOf(f.trigger("retire")).Reason)
}

// TestAGateMayNotReadSecrets: what a condition fails on reaches the status (a value
// CEL could not convert, say), so a gate over Secrets is refused before it lists them.
func TestAGateMayNotReadSecrets(t *testing.T) {
	gate := webReady95(0)
	gate.Objects.Resource = v1alpha1.TriggerResource{APIVersion: "v1", Kind: "Secret"}
	gate.Objects.Selector = nil
	gate.Objects.Condition = "objects.all(s, int(s.data.password) > 0)"
	f, _, _ := gateFixture(t, gate, 0)
	f.sync("retire")
	assert.Empty(t, f.pipelineList())
	got := f.trigger("retire")
	require.Len(t, got.Status.Gates, 1)
	assert.Equal(t, "a gate may not read Secrets", got.Status.Gates[0].Message)
	for _, a := range f.dynamic.Actions() {
		assert.NotEqual(t, "secrets", a.GetResource().Resource, "listed no Secret")
	}
}
