package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

func TestWhyTellsWhatHoldsItBack(t *testing.T) {
	since := metav1.NewTime(time.Now().Add(-90 * time.Minute))
	drain := &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "retire-n1", Namespace: "demo"}, Status: v1alpha1.PipelineStatus{
		Phase:      v1alpha1.PipelineRunning,
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonStepRunning}},
		BlockedBy: []v1alpha1.Blocker{{Kind: v1alpha1.KindPodDisruptionBudget, Namespace: "apps", Name: "web", Step: "drain", Since: &since,
			Unblock: "the PodDisruptionBudget apps/web allows a disruption\x1b[31m"}},
	}}
	retire := &v1alpha1.PipelineTrigger{ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: "demo"}, Status: v1alpha1.PipelineTriggerStatus{
		Running: 5, Waiting: 12,
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.TriggerReasonNodeBudgetFull}},
		BlockedBy:  []v1alpha1.Blocker{{Kind: v1alpha1.BlockerNodeBudget, Name: "fleet", Since: &since, Unblock: "nodes back in service"}},
	}}
	done := &v1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "done", Namespace: "demo"}, Status: v1alpha1.PipelineStatus{Phase: v1alpha1.PipelineSucceeded}}
	c, _ := fakeClients(drain, retire, done)
	c.Kube = kubefake.NewClientset(&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps"},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0, CurrentHealthy: 2, DesiredHealthy: 2, ExpectedPods: 3}})

	code, out, _ := run(t, c, "why", "retire-n1")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "Pipeline demo/retire-n1: Running, StepRunning\n")
	assert.Regexp(t, `PodDisruptionBudget\s+drain\s+apps/web\s+90m ago\s+the PodDisruptionBudget apps/web allows a disruption`, out)
	assert.Contains(t, out, "; now 0 disruption(s) allowed, 2 of 3 pods healthy, 2 needed", "how the budget stands, read by the user")
	assert.NotContains(t, out, "\x1b", "what a tenant wrote cannot drive the terminal")

	code, out, _ = run(t, c, "why", "retire")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "PipelineTrigger demo/retire: NodeBudgetFull, 5 running, 12 waiting\n")
	assert.Regexp(t, `NodeBudget\s+fleet\s+90m ago\s+nodes back in service`, out)

	code, out, _ = run(t, c, "why", "done")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "nothing holds it back")

	code, _, errOut := run(t, c, "why", "missing")
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "no pipeline or trigger missing in namespace demo")
}

func TestWriteBlockersWithoutStepColumnForTriggers(t *testing.T) {
	var buf bytes.Buffer
	writeBlockers(&buf, []v1alpha1.Blocker{{Kind: v1alpha1.BlockerPaused, Name: "alice"}}, false, time.Now(), "")
	assert.Regexp(t, `BLOCKED BY\s+OBJECT\s+SINCE\s+UNBLOCKED WHEN\n\s+Paused\s+alice\s+-\s*\n`, buf.String())
}
