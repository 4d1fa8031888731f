package node

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/stepwise-dev/stepwise/pkg/executor"
)

func TestDescribe(t *testing.T) {
	tests := []struct {
		executor     executor.TaskExecutor
		wantParams   []string
		wantRequired []string
	}{
		{Cordon{}, []string{"node"}, []string{"node"}},
		{Drain{}, []string{"node", "timeout", "policy", "podSelector", "gracePeriodSeconds", "deleteEmptyDirData"}, []string{"node"}},
		{Delete{}, []string{"node"}, []string{"node"}},
	}
	for _, tt := range tests {
		t.Run(tt.executor.Name(), func(t *testing.T) {
			d := executor.Describe(tt.executor)
			assert.NotEmpty(t, d.Description)
			assert.Empty(t, d.Plugin, "built in")
			var names, required []string
			for _, p := range d.Parameters {
				names = append(names, p.Name)
				if p.Required {
					required = append(required, p.Name)
				}
				assert.NotEmpty(t, p.Description, p.Name)
			}
			assert.Equal(t, tt.wantParams, names)
			assert.Equal(t, tt.wantRequired, required)
		})
	}
}
