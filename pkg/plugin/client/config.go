package client

import (
	"os/exec"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
	"github.com/stepwise-dev/stepwise/pkg/tracing"
)

// This file is go-plugin's configuration of every client of a Stepwise plugin, the
// operator's, `plugin run`'s and plugintest's: the handshake, the plugin set, the
// protocol versions and the gRPC options.

// startConfig is go-plugin's configuration of a client of the plugin executable that cmd
// runs: every protocol version (a plugin built against an older SDK keeps working), mutual
// TLS, no environment but cmd.Env and go-plugin's handshake variables (never the caller's:
// its token path, proxies, cloud credentials), and the plugin killed when the caller dies.
func startConfig(cmd *exec.Cmd, opts Options) *plugin.ClientConfig {
	orphanGuard(cmd)
	cfg := baseConfig(opts)
	cfg.VersionedPlugins = proto.VersionedPlugins(nil)
	cfg.Cmd = cmd
	cfg.AutoMTLS = true
	cfg.SkipHostEnv = true
	cfg.StartTimeout = opts.StartTimeout
	return cfg
}

// attachConfig is go-plugin's configuration of a client of a plugin that runs already
// (one a developer started under a debugger, or plugintest's in-process one).
func attachConfig(rc *plugin.ReattachConfig, opts Options) *plugin.ClientConfig {
	cfg := baseConfig(opts)
	// A client that attaches takes the plugin's version as it is, and dispenses from
	// Plugins, never VersionedPlugins.
	cfg.Plugins = proto.VersionedPlugins(nil)[rc.ProtocolVersion]
	cfg.Reattach = rc
	return cfg
}

// baseConfig is what every client shares: the handshake, gRPC only, messages bounded as
// the protocol bounds them, and the caller's logging.
func baseConfig(opts Options) *plugin.ClientConfig {
	logger := opts.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &plugin.ClientConfig{
		HandshakeConfig:  proto.Handshake,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		// Set after go-plugin's own (unbounded) call options, so these win.
		GRPCDialOptions: dialOptions(opts.TracerProvider),
		Logger:          logger,
		SyncStdout:      opts.Stdout,
		SyncStderr:      opts.Stderr,
		Stderr:          opts.ProcessStderr,
	}
}

// dialOptions bound what a client sends and receives to the protocol's limit, which the
// codec keeps every request under and the SDK every answer, and trace the calls with tp.
func dialOptions(tp trace.TracerProvider) []grpc.DialOption {
	opts := []grpc.DialOption{grpc.WithDefaultCallOptions(
		grpc.MaxCallRecvMsgSize(proto.MaxGRPCMessageSize),
		grpc.MaxCallSendMsgSize(proto.MaxGRPCMessageSize),
	)}
	if tp != nil {
		opts = append(opts, grpc.WithStatsHandler(otelgrpc.NewClientHandler(
			otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(tracing.Propagator()))))
	}
	return opts
}
