// Package proto is the versioned protocol (stepwise.plugin.v1) between the Stepwise
// operator and out-of-process executor plugins, plus the go-plugin glue both sides share.
// plugin.pb.go and plugin_grpc.pb.go are generated from plugin.proto by
// hack/update-proto.sh; this file is written by hand.
package proto

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// Handshake is checked by the host and the plugin before anything else: a binary that is
// not a Stepwise plugin, or speaks another protocol version, is refused.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "STEPWISE_PLUGIN",
	MagicCookieValue: "stepwise.plugin.v1",
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
