// Package proto is the versioned protocol (stepwise.plugin.v1) between the Stepwise
// operator and out-of-process executor plugins, plus the go-plugin glue both sides share;
// a client's own (how it starts, dials and maps errors) is pkg/plugin/client's.
// plugin.pb.go and plugin_grpc.pb.go are generated from plugin.proto by
// hack/update-proto.sh; this file is written by hand.
package proto

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// Handshake is checked by the host and the plugin before anything else: a binary that is
// not a Stepwise plugin is refused. Its ProtocolVersion is the first; which version a
// plugin and the host speak is negotiated (VersionedPlugins).
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  Version1,
	MagicCookieKey:   "STEPWISE_PLUGIN",
	MagicCookieValue: "stepwise.plugin.v1",
}

// The protocol versions, negotiated by go-plugin: the host speaks every one, and a plugin
// the highest it knows. Each only adds fields (plugin.proto), so one service serves all.
const (
	// Version1 is the first protocol.
	Version1 = 1
	// Version2 adds typed parameters, Secrets by parameter, a hook's state and start
	// time; a plugin of version 1 ignores them and never returns state.
	Version2 = 2
	// Version3 adds Plan; the host plans an executor of an older plugin as contract.NoPlan.
	Version3 = 3
	// Version4 adds a step's created record (Result.Created, Request.Created) and its
	// start. A plugin of this version relies on its teardown getting the record, so it
	// refuses a host that would drop it.
	Version4 = 4
	// Latest is what this SDK serves.
	Latest = Version4
)

// VersionedPlugins is the plugin set under every version the host speaks.
func VersionedPlugins(server ExecutorServer) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{Version1: PluginSet(server), Version2: PluginSet(server), Version3: PluginSet(server), Version4: PluginSet(server)}
}

// PluginName is the name of the one go-plugin plugin a Stepwise plugin binary serves.
const PluginName = "executor"

// GRPCPlugin is the go-plugin plugin of the Executor service (gRPC only).
type GRPCPlugin struct {
	plugin.Plugin // nil: no net/rpc
	// Impl is the implementation served on the plugin side; nil on the host side.
	Impl ExecutorServer
}

var _ plugin.GRPCPlugin = (*GRPCPlugin)(nil)

// GRPCServer registers the Executor service on the plugin's gRPC server.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	RegisterExecutorServer(s, p.Impl)
	return nil
}

// GRPCClient returns an ExecutorClient on the host side.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewExecutorClient(c), nil
}

// PluginSet is the plugin set of both sides.
func PluginSet(server ExecutorServer) plugin.PluginSet {
	return plugin.PluginSet{PluginName: &GRPCPlugin{Impl: server}}
}
