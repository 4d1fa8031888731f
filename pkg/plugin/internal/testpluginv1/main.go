// Command testpluginv1 is a plugin as one built against the first protocol version would
// be: it speaks version 1 only (no VersionedPlugins), serves the protocol's service
// directly, declares untyped parameters, and knows nothing of state or Secrets by
// parameter. The host's tests show that such a plugin keeps working.
package main

import (
	"context"

	"github.com/hashicorp/go-plugin"

	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
)

// server serves one executor, v1.echo, whose hooks are done at once and echo the params
// (and how many Secrets they got) as outputs.
type server struct {
	proto.UnimplementedExecutorServer
}

func (server) Describe(context.Context, *proto.DescribeRequest) (*proto.DescribeResponse, error) {
	return &proto.DescribeResponse{Executors: []*proto.ExecutorInfo{{
		Name: "v1.echo", Version: "v1.0.0", Description: "Echoes its parameters as outputs.",
		Parameters: []*proto.Parameter{{Name: "text", Description: "What to echo.", Required: true}},
	}}}, nil
}

func (server) RunHook(_ context.Context, in *proto.RunHookRequest) (*proto.RunHookResponse, error) {
	outputs := map[string]string{"hook": in.GetHook().String()}
	for k, v := range in.GetParams() {
		outputs[k] = v
	}
	return &proto.RunHookResponse{Outcome: &proto.RunHookResponse_Result{Result: &proto.Result{
		Done: true, Outputs: outputs, Message: "echoed by a version 1 plugin",
	}}}, nil
}

func main() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: plugin.HandshakeConfig{
			ProtocolVersion: 1, MagicCookieKey: "STEPWISE_PLUGIN", MagicCookieValue: "stepwise.plugin.v1",
		},
		Plugins:    plugin.PluginSet{proto.PluginName: &proto.GRPCPlugin{Impl: server{}}},
		GRPCServer: plugin.DefaultGRPCServer,
	})
}
