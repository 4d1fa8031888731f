package host

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// TestPluginExecutorDescribesWhatThePluginSaid: the typed declarations (type, default)
// cross the protocol.
func TestPluginExecutorDescribesWhatThePluginSaid(t *testing.T) {
	_, reg := startHost(t, klog.Background(), pluginDir(t, []string{"stepwise-plugin-example"}, nil))

	assert.Equal(t, contract.Description{
		Version:     "v0.1.0",
		Description: "Writes the output greeting from the parameter name.",
		Parameters: []contract.Parameter{
			{Name: "name", Description: "Who to greet.", Required: true, Type: contract.ParamString},
			{Name: "salutation", Description: "How to greet.", Type: contract.ParamString, Default: "Hello"},
		},
		Plugin: "stepwise-plugin-example",
	}, executor.Describe(get(t, reg, "example.greet")))
}
