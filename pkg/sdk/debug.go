package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/hashicorp/go-plugin"

	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
)

// DebugEnv is the environment variable that puts a plugin in debug mode when it is "1":
// started by hand (under a debugger: STEPWISE_PLUGIN_DEBUG=1 dlv exec
// ./stepwise-plugin-x), the plugin serves in go-plugin's test mode and prints on its
// standard output one line, proto.ReattachPrefix followed by the JSON of proto.Reattach,
// then serves until interrupted:
//
//	STEPWISE_PLUGIN_REATTACH={"protocolVersion":4,"network":"unix","address":"/tmp/plugin1234","pid":4242}
//
// Give the JSON to the operator's --plugin-reattach NAME=FILE. The connection is not
// mutually authenticated and the address is a Unix socket: the operator runs on the same
// machine, as the same user.
const DebugEnv = proto.ReattachEnv

// serveDebug serves the executors in this process until ctx ends, after printing the
// reattach line on out.
func serveDebug(ctx context.Context, out, logs io.Writer, executors ...Executor) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rc, stopped, err := ServeInProcess(ctx, logs, executors...)
	if err != nil {
		return err
	}
	stop := func(err error) error {
		cancel()
		<-stopped
		return err
	}
	line, err := reattachLine(rc)
	if err != nil {
		return stop(err)
	}
	if _, err := fmt.Fprintln(out, line); err != nil {
		return stop(fmt.Errorf("print the reattach line: %w", err))
	}
	<-stopped
	return nil
}

// reattachLine is the line a plugin in debug mode prints for rc.
func reattachLine(rc *plugin.ReattachConfig) (string, error) {
	b, err := json.Marshal(proto.ReattachOf(rc))
	if err != nil {
		return "", fmt.Errorf("encode the reattach configuration: %w", err)
	}
	return proto.ReattachPrefix + string(b), nil
}
