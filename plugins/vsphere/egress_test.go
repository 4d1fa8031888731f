package main

import (
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

func TestLoopbackVCenterIsRefusedWithoutAllowance(t *testing.T) {
	sim := startVCSim(t)
	vm := sim.vm(t, "DC0_H0_VM0")
	tests := []struct {
		name    string
		secrets func() map[string][]byte
	}{
		{name: "https with its CA", secrets: sim.secrets},
		{name: "insecure", secrets: func() map[string][]byte {
			s := sim.secrets()
			delete(s, keyCA)
			s[keyInsecure] = []byte("true")
			return s
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := plugintest.Serve(t, newTestExecutorAllowing())
			res, err := c.Run(t.Context(), executorName, sdk.HookCreate,
				request(withParams(nil, paramProviderID, "vsphere://"+vm.UUID), tt.secrets(), nil))
			var e *sdk.Error
			require.ErrorAs(t, err, &e, "result: %+v", res)
			assert.Equal(t, "EndpointNotAllowed", e.Reason)
			assert.True(t, e.Permanent)
			assert.Contains(t, err.Error(), "127.0.0.1 is a loopback address")
			assert.Contains(t, err.Error(), "--plugin-allowed-cidrs")
			assert.True(t, sim.exists(t, vm))
			assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, sim.vm(t, vm.Name).PowerState)
		})
	}
}

// The url key may carry credentials in its user info or query: no message shows them.
func TestMessagesShowTheVCenterURLWithoutCredentials(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := closed.Addr().String()
	require.NoError(t, closed.Close())
	tests := []struct {
		name     string
		url      string
		executor *terminateVM
		reason   string
	}{
		{name: "unreachable", url: "https://admin:Sup3rS3cret@" + addr + "/sdk?token=abc123", executor: newTestExecutor(), reason: "VSphereUnavailable"},
		{name: "refused", url: "https://admin:Sup3rS3cret@" + addr + "/sdk?token=abc123", executor: newTestExecutorAllowing(), reason: "EndpointNotAllowed"},
		{name: "not a URL", url: "ftp://admin:Sup3rS3cret@" + addr + "/sdk?token=abc123", executor: newTestExecutor(), reason: "InvalidParameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secrets := map[string][]byte{keyURL: []byte(tt.url), keyUsername: []byte(simUser), keyPassword: []byte(simPassword)}
			c := plugintest.Serve(t, tt.executor)
			_, err := c.Run(t.Context(), executorName, sdk.HookCreate, request(withParams(nil, paramNode, "k8s-node-3"), secrets, nil))
			var e *sdk.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tt.reason, e.Reason, "%v", err)
			for _, secret := range []string{"admin:", "Sup3rS3cret", "abc123", simPassword} {
				assert.NotContains(t, err.Error(), secret)
			}
			if tt.reason != "InvalidParameter" {
				assert.True(t, strings.Contains(err.Error(), addr), "the message says where: %v", err)
			}
		})
	}
}
