package proto

import (
	"net"
	"testing"

	"github.com/hashicorp/go-plugin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReattachRoundTrip(t *testing.T) {
	addr, err := net.ResolveUnixAddr("unix", "/tmp/plugin123")
	require.NoError(t, err)
	r := ReattachOf(&plugin.ReattachConfig{ProtocolVersion: Version2, Addr: addr, Pid: 42})
	assert.Equal(t, Reattach{ProtocolVersion: 2, Network: "unix", Address: "/tmp/plugin123", Pid: 42}, r)

	cfg, err := ParseReattach([]byte(`{"protocolVersion":2,"network":"unix","address":"/tmp/plugin123","pid":42}`))
	require.NoError(t, err)
	assert.Equal(t, plugin.ProtocolGRPC, cfg.Protocol)
	assert.Equal(t, 2, cfg.ProtocolVersion)
	assert.Equal(t, "/tmp/plugin123", cfg.Addr.String())
	assert.Equal(t, 42, cfg.Pid)
	assert.True(t, cfg.Test, "the developer's process is never killed")
}

func TestParseReattachErrors(t *testing.T) {
	for in, want := range map[string]string{
		`not json`:                              "read the reattach JSON",
		`{"network":"unix","address":"/tmp/x"}`: "needs an address and a pid",
		`{"network":"udp","address":"127.0.0.1:1","pid":1}`:  `names network "udp"`,
		`{"network":"tcp","address":"no port here","pid":1}`: "resolve the reattach address",
	} {
		_, err := ParseReattach([]byte(in))
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), want, in)
	}
}
