package host

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// TestPlanThroughThePlugin: a plan crosses the protocol (rows, warnings, outputs), with the
// Secrets removed by the SDK; an executor that cannot plan, and one of a plugin of the
// first protocol version, plan as "would run; no details".
func TestPlanThroughThePlugin(t *testing.T) {
	_, reg := startHost(t, klog.Background(), pluginDir(t, []string{"stepwise-plugin-test", "stepwise-plugin-example", "stepwise-plugin-v1"}, nil))
	ctx := context.Background()

	req := request("", map[string]string{"b": "2", "a": "1"})
	req.Secrets = map[string][]byte{"token": []byte("pl4n-s3cr3t")}
	got, err := executor.Plan(ctx, get(t, reg, "test.echo"), req)
	require.NoError(t, err)
	assert.Equal(t, contract.Plan{
		Summary: "would echo 2 parameters",
		Details: []contract.PlanItem{
			{Kind: "Parameter", Name: "a", Action: "echo", Note: "1"},
			{Kind: "Parameter", Name: "b", Action: "echo", Note: "2"},
		},
		Warnings: []string{"the token is [redacted]"},
		Outputs:  map[string]string{"step": "second"},
	}, got)

	for name, params := range map[string]map[string]string{"example.greet": {"name": "Ada"}, "v1.echo": {"text": "x"}} {
		got, err := executor.Plan(ctx, get(t, reg, name), request("", params))
		require.NoError(t, err, name)
		assert.Equal(t, contract.NoPlan(), got, name)
	}

	// The parameters are checked as for Create.
	_, err = executor.Plan(ctx, get(t, reg, "example.greet"), request("", nil))
	require.Error(t, err)
	assert.Equal(t, `parameter "name" is required`, err.Error())
	assert.True(t, contract.IsPermanent(err))
}
