package main

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
	"github.com/stepwise-dev/stepwise/pkg/sdk/sdkhttp"
)

// newTestApproval is the executor with sdkhttp.Client's settings but a policy that allows
// the fake on loopback, given rather than read from the environment, as
// --plugin-allowed-cidrs would allow a private network.
func newTestApproval() approval {
	policy := egress.New(netip.MustParsePrefix("127.0.0.0/8"))
	return approval{client: &http.Client{
		Transport:     egress.LimitResponses(policy.Transport(nil), egress.MaxResponseBytes),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// The plugin's own client refuses an internal API the operator did not allow, before
// connecting.
func TestLoopbackIsRefusedWithoutAllowance(t *testing.T) {
	t.Setenv(egress.EnvAllowedCIDRs, "")
	f := newFake(t, "")
	c := plugintest.Serve(t, approval{client: sdkhttp.Client()})
	_, err := c.Run(t.Context(), executorName, sdk.HookCreate,
		plugintest.Request(sdk.HookCreate, "uid", map[string]string{"url": f.url, "summary": "deploy v2"}))
	require.Error(t, err)
	assert.Equal(t, egress.ReasonEndpointNotAllowed, sdk.OwnReason(err))
	assert.True(t, sdk.IsPermanent(err))
	assert.Contains(t, err.Error(), "--plugin-allowed-cidrs")
	assert.Zero(t, f.callCount(), "nothing reached the API")
}
