package node

import (
	"testing"

	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/executor/executortest"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

func TestDescribe(t *testing.T) {
	tests := []struct {
		executor     executor.TaskExecutor
		wantParams   []string
		wantRequired []string
		// full is a valid value of every parameter the executor reads.
		full map[string]string
	}{
		{Cordon{}, []string{"node"}, []string{"node"}, map[string]string{"node": "n1"}},
		{
			Drain{},
			[]string{"node", "timeout", "policy", "replacement", "handoffTimeout", "podSelector", "rules", "gracePeriodSeconds", "deleteEmptyDirData"}, []string{"node"},
			map[string]string{"node": "n1", "timeout": "1m", "policy": "Force", "replacement": "Surge", "handoffTimeout": "2m", "podSelector": "app=web",
				"rules": "- {podSelector: {matchLabels: {app: ceph}}, behavior: Drain, order: 10}", "gracePeriodSeconds": "30", "deleteEmptyDirData": "true"},
		},
		{Delete{}, []string{"node"}, []string{"node"}, map[string]string{"node": "n1"}},
	}
	for _, tt := range tests {
		t.Run(tt.executor.Name(), func(t *testing.T) {
			executortest.AssertBuiltInDescription(t, tt.executor, tt.wantParams, tt.wantRequired)
			plugintest.AssertDeclarations(t, executor.Describe(tt.executor), tt.full)
		})
	}
}
