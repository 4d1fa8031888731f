package testexec

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
	}{
		{Noop{}, nil, nil},
		{Record{}, []string{"configMap", "gate", "fail", "output"}, nil},
		{Sleep{}, []string{"duration", "fail"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.executor.Name(), func(t *testing.T) {
			executortest.AssertBuiltInDescription(t, tt.executor, tt.wantParams, tt.wantRequired)
		})
	}
	plugintest.AssertDeclarations(t, Record{}.Describe(),
		map[string]string{"configMap": "calls", "gate": "true", "fail": FailRetryable, "output": "x"})
}
