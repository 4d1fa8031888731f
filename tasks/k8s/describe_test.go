package k8s

import (
	"testing"

	"github.com/stretchr/testify/assert"

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
		{
			Apply{}, []string{"manifest", "force"}, []string{"manifest"},
			map[string]string{"manifest": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", "force": "true"},
		},
		{
			Wait{},
			[]string{"apiVersion", "kind", "name", "namespace", "condition", "jsonPath", "value", "timeout"}, []string{"apiVersion", "kind", "name"},
			// condition and jsonPath exclude each other, but each is a parameter it reads.
			map[string]string{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "shop",
				"condition": "Available", "jsonPath": "{.status.readyReplicas}", "value": "2", "timeout": "1m"},
		},
		{
			Scale{},
			[]string{"kind", "name", "namespace", "replicas", "timeout"}, []string{"name", "replicas"},
			map[string]string{"kind": "StatefulSet", "name": "db", "namespace": "shop", "replicas": "3", "timeout": "1m"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.executor.Name(), func(t *testing.T) {
			executortest.AssertBuiltInDescription(t, tt.executor, tt.wantParams, tt.wantRequired)
			plugintest.AssertDeclarations(t, executor.Describe(tt.executor), tt.full)
		})
	}
}

// TestApplyUpdatesInPlace: the engine re-runs an edited k8s.apply step over its inventory,
// which the re-run prunes, rather than tearing it down first.
func TestApplyUpdatesInPlace(t *testing.T) {
	assert.True(t, executor.Describe(Apply{}).UpdatesInPlace)
	assert.False(t, executor.Describe(Wait{}).UpdatesInPlace)
}

func TestScaleDescribe(t *testing.T) {
	executortest.AssertBuiltInDescription(t, Scale{},
		[]string{"kind", "name", "namespace", "replicas", "timeout"}, []string{"name", "replicas"})
	// An edit of the step may name another workload: the last run's count is restored
	// before the new run records its own.
	assert.False(t, executor.Describe(Scale{}).UpdatesInPlace)
	assert.Equal(t, "k8s.scale", Scale{}.Name())
	assert.Contains(t, Executors(), executor.TaskExecutor(Scale{}))
}
