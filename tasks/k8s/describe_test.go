package k8s

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/executor/executortest"
)

func TestDescribe(t *testing.T) {
	tests := []struct {
		executor     executor.TaskExecutor
		wantParams   []string
		wantRequired []string
	}{
		{Apply{}, []string{"manifest", "force"}, []string{"manifest"}},
		{Wait{}, []string{"apiVersion", "kind", "name", "namespace", "condition", "jsonPath", "value", "timeout"}, []string{"apiVersion", "kind", "name"}},
	}
	for _, tt := range tests {
		t.Run(tt.executor.Name(), func(t *testing.T) {
			executortest.AssertBuiltInDescription(t, tt.executor, tt.wantParams, tt.wantRequired)
		})
	}
}

// TestApplyUpdatesInPlace: the engine re-runs an edited k8s.apply step over its inventory,
// which the re-run prunes, rather than tearing it down first.
func TestApplyUpdatesInPlace(t *testing.T) {
	assert.True(t, executor.Describe(Apply{}).UpdatesInPlace)
	assert.False(t, executor.Describe(Wait{}).UpdatesInPlace)
}
