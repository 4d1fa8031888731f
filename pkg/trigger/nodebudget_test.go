package trigger

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
)

func newNodeBudget(name string, maxUnavailable int32, selector map[string]string) *v1alpha1.NodeBudget {
	b := &v1alpha1.NodeBudget{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NodeBudgetSpec{MaxUnavailable: maxUnavailable}}
	if selector != nil {
		b.Spec.NodeSelector = &v1alpha1.LabelSelector{MatchLabels: selector}
	}
	return b
}

// budgetTrigger is triggertest.Trigger under another name, selecting pool=POOL nodes labelled for
// retirement, naming the budget, at concurrency 3.
func budgetTrigger(name, pool, budget string) *v1alpha1.PipelineTrigger {
	trig := triggertest.Trigger()
	trig.Name, trig.UID = name, types.UID("uid-trigger-"+name)
	trig.Spec.Selector = &v1alpha1.LabelSelector{MatchLabels: map[string]string{"stepwise.dev/retire": "true", "pool": pool}}
	trig.Spec.Concurrency = 3
	trig.Spec.NodeBudgetRef = &v1alpha1.NodeBudgetRef{Name: budget}
	return trig
}

func withNodeBudgetUse(f *fixture) {
	f.rbac.allow(nodeRetirerUser, "nodebudgets", "", v1alpha1.VerbUse)
}

// TestTwoTriggersShareOneNodeBudget: two triggers of three each name one budget of 3,
// one node of which is NotReady already: together they start 2; a finish frees a place,
// which the other trigger takes; the full one says so.
func TestTwoTriggersShareOneNodeBudget(t *testing.T) {
	in := objs(newTemplate("retire-node"), newNodeBudget("fleet", 3, map[string]string{"fleet": "yes"}),
		budgetTrigger("web", "web", "fleet"), budgetTrigger("db", "db", "fleet"))
	var web, db []*unstructured.Unstructured
	for i := range 3 {
		w := triggertest.ReadyNode("web-"+string(rune('a'+i)), time.Duration(i)*time.Second, map[string]string{"stepwise.dev/retire": "true", "pool": "web", "fleet": "yes"})
		d := triggertest.ReadyNode("db-"+string(rune('a'+i)), time.Duration(i)*time.Second, map[string]string{"stepwise.dev/retire": "true", "pool": "db", "fleet": "yes"})
		web, db = append(web, w), append(db, d)
		in = append(in, w, d)
	}
	sick := triggertest.Node("sick", 0, map[string]string{"fleet": "yes"}) // NotReady: no Ready condition
	outside := triggertest.Node("elsewhere", 0, nil)                       // NotReady, but the budget does not count it
	in = append(in, sick, outside)
	f := newFixture(t, in)
	withNodeBudgetUse(f)

	f.sync("web")
	assert.Len(t, f.pipelineList(), 2, "sick takes one place of three")
	for _, p := range f.pipelineList() {
		assert.Equal(t, "fleet", p.Labels[v1alpha1.LabelNodeBudget])
	}
	f.sync("db")
	assert.Len(t, f.pipelineList(), 2, "the budget is full: db starts nothing")
	ready := readyOf(f.trigger("db"))
	assert.Equal(t, v1alpha1.TriggerReasonNodeBudgetFull, ready.Reason)
	assert.Contains(t, ready.Message, "NodeBudget fleet is full: 3 of 3 nodes unavailable: sick (NotReady), web-a (retiring), web-b (retiring)")

	f.finish("web", web[0])
	f.sync("db")
	assert.Len(t, f.pipelineList(), 3, "web-a's end freed a place, which db takes")
	f.sync("web")
	assert.Len(t, f.pipelineList(), 3, "and web waits")
	assert.Equal(t, v1alpha1.TriggerReasonNodeBudgetFull, readyOf(f.trigger("web")).Reason)
	_ = db
}

// TestANodeThatIsUnavailableAlreadyStartsInAFullBudget: retiring a node that is NotReady
// makes nothing more unavailable.
func TestANodeThatIsUnavailableAlreadyStartsInAFullBudget(t *testing.T) {
	labels := map[string]string{"stepwise.dev/retire": "true", "pool": "web"}
	down := triggertest.Node("down", 0, labels) // NotReady
	up := triggertest.ReadyNode("up", -time.Second, labels)
	f := newFixture(t, objs(newTemplate("retire-node"), newNodeBudget("one", 1, nil), budgetTrigger("web", "web", "one"), down, up))
	withNodeBudgetUse(f)
	f.sync("web")
	require.Len(t, f.pipelineList(), 1)
	assert.Equal(t, "down", f.pipelineList()[0].Annotations[v1alpha1.AnnotationObject], "up, older, waits: down counts already")
}

// TestABudgetOfZeroHoldsEveryTrigger: maxUnavailable 0 is a switch that stops them all.
func TestABudgetOfZeroHoldsEveryTrigger(t *testing.T) {
	f := newFixture(t, objs(newTemplate("retire-node"), newNodeBudget("freeze", 0, nil), budgetTrigger("web", "web", "freeze"),
		triggertest.ReadyNode("a", 0, map[string]string{"stepwise.dev/retire": "true", "pool": "web"})))
	withNodeBudgetUse(f)
	f.sync("web")
	assert.Empty(t, f.pipelineList())
	assert.Equal(t, v1alpha1.TriggerReasonNodeBudgetFull, readyOf(f.trigger("web")).Reason)
}

// TestATriggerMayNotUseABudgetItWasNotGiven: without the verb "use" on the budget the
// trigger acts on nothing, and says which right it lacks.
func TestATriggerMayNotUseABudgetItWasNotGiven(t *testing.T) {
	f := newFixture(t, objs(newTemplate("retire-node"), newNodeBudget("fleet", 3, nil), budgetTrigger("web", "web", "fleet"),
		triggertest.ReadyNode("a", 0, map[string]string{"stepwise.dev/retire": "true", "pool": "web"})))
	f.sync("web")
	assert.Empty(t, f.pipelineList())
	ready := readyOf(f.trigger("web"))
	assert.Equal(t, "False/"+v1alpha1.TriggerReasonForbidden, string(ready.Status)+"/"+ready.Reason)
	assert.Equal(t, `ServiceAccount ns/retirer may not use NodeBudget fleet (verb "use" on nodebudgets.stepwise.dev)`, ready.Message)
	review := f.rbac.reviews[len(f.rbac.reviews)-1]
	assert.Equal(t, "fleet", review.ResourceAttributes.Name, "the review names the budget: a right on another does not count")
}

// TestATriggerNamingAMissingBudgetStartsNothing.
func TestATriggerNamingAMissingBudgetStartsNothing(t *testing.T) {
	f := newFixture(t, objs(newTemplate("retire-node"), budgetTrigger("web", "web", "nowhere"),
		triggertest.ReadyNode("a", 0, map[string]string{"stepwise.dev/retire": "true", "pool": "web"})))
	withNodeBudgetUse(f)
	f.sync("web")
	assert.Empty(t, f.pipelineList())
	ready := readyOf(f.trigger("web"))
	assert.Equal(t, "False/"+v1alpha1.TriggerReasonNodeBudgetNotFound, string(ready.Status)+"/"+ready.Reason)

	require.NoError(t, f.budgets.Add(newNodeBudget("nowhere", 1, nil)))
	f.sync("web")
	assert.Len(t, f.pipelineList(), 1)
}
