package host

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
)

// TestPluginOfTheFirstProtocolVersionKeepsWorking: a plugin built against protocol
// version 1 (no VersionedPlugins, no typed parameters, no state) is started beside one of
// the latest version; each speaks its own version, and both serve their executors.
func TestPluginOfTheFirstProtocolVersionKeepsWorking(t *testing.T) {
	h, reg := startHost(t, klog.Background(), pluginDir(t, []string{"stepwise-plugin-v1", "stepwise-plugin-example"}, nil))
	assert.Equal(t, []string{"example.greet", "v1.echo"}, reg.Names())

	echo := get(t, reg, "v1.echo")
	desc := executor.Describe(echo)
	require.Len(t, desc.Parameters, 1)
	assert.Equal(t, contract.Parameter{Name: "text", Description: "What to echo.", Required: true}, desc.Parameters[0], "untyped, as version 1 had them")

	ctx := context.Background()
	req := request(contract.HookCreate, map[string]string{"text": "hi"})
	req.State = map[string]string{"ignored": "by version 1"}
	res, err := executor.RunHook(ctx, echo, req)
	require.NoError(t, err)
	assert.True(t, res.Done)
	assert.Equal(t, "echoed by a version 1 plugin", res.Message)
	assert.Equal(t, "hi", res.Outputs["text"])
	assert.Nil(t, res.State)

	res, err = executor.RunHook(ctx, get(t, reg, "example.greet"), request(contract.HookCreate, map[string]string{"name": "Ada"}))
	require.NoError(t, err)
	assert.Equal(t, "Hello, Ada!", res.Outputs["greeting"])
	assert.Equal(t, map[string]int{"stepwise-plugin-v1": proto.Version1, "stepwise-plugin-example": proto.Latest}, h.Versions())
}
