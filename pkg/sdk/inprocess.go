package sdk

import (
	"context"
	"errors"
	"io"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
)

// ServeInProcess serves the executors as Serve does, but in go-plugin's test mode: inside
// this process, without the operator's handshake, until ctx ends or the client closes its
// connection. The debug mode (DebugEnv) and plugintest use it. It returns once the plugin
// listens, with what a go-plugin client attaches with (plugin.ClientConfig.Reattach; its
// ReattachFunc watches this server, not a process), and a channel closed once it stopped
// serving. The hooks' Logger lines, and go-plugin's own from level Warn, go to logs.
func ServeInProcess(ctx context.Context, logs io.Writer, executors ...Executor) (*plugin.ReattachConfig, <-chan struct{}, error) {
	logs = newSyncWriter(logs)
	config := serveConfig(NewServerWithLogs(logs, executors...), nil)
	config.Logger = hclog.New(&hclog.LoggerOptions{Name: "plugin", Level: hclog.Warn, Output: logs, JSONFormat: true})
	reattach := make(chan *plugin.ReattachConfig, 1)
	stopped := make(chan struct{})
	config.Test = &plugin.ServeTestConfig{Context: ctx, ReattachConfigCh: reattach, CloseCh: stopped}
	go plugin.Serve(config)
	select {
	case rc := <-reattach:
		rc.ReattachFunc = func() (runner.AttachedRunner, error) { return inProcess{stopped: stopped}, nil }
		return rc, stopped, nil
	case <-stopped:
		return nil, nil, errors.New("the plugin stopped before it listened (go-plugin logged why)")
	}
}

// inProcess is go-plugin's view of a plugin served in this process: it is running until
// its server stops, and it is not killed (the client closing its connection stops it).
type inProcess struct{ stopped <-chan struct{} }

var _ runner.AttachedRunner = inProcess{}

func (r inProcess) Wait(ctx context.Context) error {
	select {
	case <-r.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (inProcess) Kill(context.Context) error { return nil }
func (inProcess) ID() string                 { return "in-process" }

func (inProcess) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

func (inProcess) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}
