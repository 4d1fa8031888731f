package host

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

func TestPluginExecutorDescribesWhatThePluginSaid(t *testing.T) {
	_, reg := startHost(t, klog.Background(), pluginDir(t, []string{"stepwise-plugin-example"}, nil))

	assert.Equal(t, contract.Description{
		Version:     "v0.1.0",
		Description: "Writes the output greeting from the parameter name.",
		Parameters:  []contract.Parameter{{Name: "name", Description: "Who to greet.", Required: true}},
		Plugin:      "stepwise-plugin-example",
	}, executor.Describe(get(t, reg, "example.greet")))
}
