package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

func template() *v1alpha1.PipelineTemplate {
	timeout := "10m"
	return &v1alpha1.PipelineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "retire-node", Namespace: "demo"},
		Spec: v1alpha1.PipelineTemplateSpec{
			Params: []v1alpha1.TemplateParam{{Name: "node", Required: true}, {Name: "timeout", Default: &timeout}, {Name: "note"}},
			Steps: []v1alpha1.Step{
				{Name: "cordon", Executor: "node.cordon"}, {Name: "drain", Executor: "node.drain"},
			},
		},
	}
}

// fields splits a table's lines into fields.
func tableFields(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

func TestTemplatesCommand(t *testing.T) {
	c, _ := fakeClients(template())
	code, out, errOut := run(t, c, "templates")
	require.Equal(t, ExitOK, code, errOut)
	rows := tableFields(out)
	require.Len(t, rows, 2)
	assert.Equal(t, []string{"TEMPLATE", "PARAMETERS", "STEPS"}, rows[0])
	assert.Equal(t, "retire-node", rows[1][0])
	assert.Equal(t, "node*,timeout=10m,note", rows[1][1])
	assert.Contains(t, out, "cordon(node.cordon) → drain(node.drain)")
}

func TestRunCommand(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		check    func(t *testing.T, p *v1alpha1.Pipeline)
	}{
		{
			name: "named, with params", args: []string{"run", "retire-node", "--name", "retire-w3", "-p", "node=worker-3", "-p", "note=a=b", "--on-failure", "Teardown"},
			check: func(t *testing.T, p *v1alpha1.Pipeline) {
				assert.Equal(t, &v1alpha1.TemplateRef{Name: "retire-node"}, p.Spec.TemplateRef)
				assert.Equal(t, map[string]string{"node": "worker-3", "note": "a=b"}, p.Spec.Params)
				assert.Equal(t, v1alpha1.FailureTeardown, p.Spec.OnFailure)
				assert.Empty(t, p.Spec.Steps)
			},
		},
		{name: "not NAME=VALUE", args: []string{"run", "retire-node", "--name", "x", "-p", "node"}, wantCode: ExitError},
		{name: "a name twice", args: []string{"run", "retire-node", "--name", "x", "-p", "node=a", "-p", "node=b"}, wantCode: ExitError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, sw := fakeClients(template())
			code, out, errOut := run(t, c, tt.args...)
			require.Equal(t, tt.wantCode, code, "stdout %s stderr %s", out, errOut)
			list, err := sw.StepwiseV1alpha1().Pipelines("demo").List(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)
			if tt.wantCode != ExitOK {
				assert.Empty(t, list.Items, "nothing created")
				return
			}
			require.Len(t, list.Items, 1)
			assert.Equal(t, "pipeline.stepwise.dev/retire-w3 created\n", out)
			tt.check(t, &list.Items[0])
		})
	}
}

func TestTriggersCommand(t *testing.T) {
	trg := &v1alpha1.PipelineTrigger{
		ObjectMeta: metav1.ObjectMeta{Name: "retire-labelled", Namespace: "demo"},
		Spec: v1alpha1.PipelineTriggerSpec{
			Resource:    v1alpha1.TriggerResource{APIVersion: "v1", Kind: "Node"},
			TemplateRef: v1alpha1.TemplateRef{Name: "retire-node"}, Concurrency: 2,
			NodeBudgetRef: &v1alpha1.NodeBudgetRef{Name: "cluster-nodes"},
		},
		Status: v1alpha1.PipelineTriggerStatus{
			Matched: 5, Running: 2, Waiting: 3, Queue: []string{"worker-3", "worker-4", "worker-5\x1b[2J"},
			Gates: []v1alpha1.TriggerGateStatus{{Name: "nodes-ready", Holds: false, Message: "the condition is false over 20 nodes",
				Since: metav1.NewTime(time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC))}},
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}},
		},
	}
	c, _ := fakeClients(trg)
	code, out, errOut := run(t, c, "triggers")
	require.Equal(t, ExitOK, code, errOut)
	rows := tableFields(out)
	require.Len(t, rows, 2)
	assert.Equal(t, []string{"retire-labelled", "Node", "retire-node", "5", "2", "3", "0", "0", "True"}, rows[1])

	code, out, errOut = run(t, c, "triggers", "retire-labelled")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "5 matched, 2 running, 3 waiting")
	assert.Regexp(t, `(?m)^Node budget: +cluster-nodes$`, out)
	assert.Regexp(t, `(?m)^Gate nodes-ready: +does not hold: the condition is false over 20 nodes \(since 2026-11-26T09:00:00Z\)$`, out)
	assert.Regexp(t, `(?m)^  1 +worker-3$`, out)
	assert.Contains(t, out, `worker-5\x1b[2J`, "the queue's names are escaped")
	assert.NotContains(t, out, "\x1b")
}
