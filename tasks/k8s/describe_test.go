package k8s

import (
	"testing"

	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/executor/executortest"
)

func TestDescribe(t *testing.T) {
	tests := []struct {
		executor     executor.TaskExecutor
		wantParams   []string
		wantRequired []string
	}{
		{Apply{}, []string{"manifest"}, []string{"manifest"}},
		{Wait{}, []string{"apiVersion", "kind", "name", "namespace", "condition", "jsonPath", "value", "timeout"}, []string{"apiVersion", "kind", "name"}},
	}
	for _, tt := range tests {
		t.Run(tt.executor.Name(), func(t *testing.T) {
			executortest.AssertBuiltInDescription(t, tt.executor, tt.wantParams, tt.wantRequired)
		})
	}
}
