package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
			[]string{"node", "timeout", "policy", "podSelector", "gracePeriodSeconds", "deleteEmptyDirData"}, []string{"node"},
			map[string]string{"node": "n1", "timeout": "1m", "policy": "Force", "podSelector": "app=web", "gracePeriodSeconds": "30", "deleteEmptyDirData": "true"},
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

// TestDrainReadsWhatItDeclares: what the engine hands over, given or defaulted, reaches
// the drain as declared.
func TestDrainReadsWhatItDeclares(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]string
		want   drainParams
	}{
		{
			"every parameter",
			map[string]string{"node": "n1", "timeout": "1m", "policy": "Force", "podSelector": "app=web", "gracePeriodSeconds": "30", "deleteEmptyDirData": "true"},
			drainParams{node: "n1", timeout: time.Minute, policy: PolicyForce, podSelector: "app=web", gracePeriodSeconds: 30, deleteEmptyDirData: true},
		},
		{
			"the defaults",
			map[string]string{"node": "n1"},
			drainParams{node: "n1", timeout: 10 * time.Minute, policy: PolicyFail, gracePeriodSeconds: -1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseDrainParams(request(t, Drain{}, nil, tt.params))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}

	// Without the engine's defaults, a grace period of 0, which kills at once, is never
	// taken for an unset one.
	req := request(t, Drain{}, nil, map[string]string{"node": "n1"})
	req.Params = map[string]string{"node": "n1", "timeout": "1m"}
	got, err := parseDrainParams(req)
	require.NoError(t, err)
	assert.Equal(t, -1, got.gracePeriodSeconds)
}
