// Package client is the one typed client of a Stepwise plugin, which the operator's host,
// `kubectl stepwise plugin run` and plugintest use alike: it starts a plugin executable (or
// attaches to one that runs), and calls Describe, Run and Plan over its one gRPC
// connection in the contract's terms (pkg/contract), each failed call mapped to the
// contract's errors in one place (errors.go). Who owns the process (restarts, a checksum,
// a memory limit) is the caller's business. It imports neither Kubernetes nor the
// operator, so that plugintest, which plugin authors import, stays light.
package client

import (
	"fmt"
	"go.opentelemetry.io/otel/trace"
	"io"
	"os/exec"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
)

// Options configure a client.
type Options struct {
	// Name is the plugin's name in errors: "plugin NAME: ...".
	Name string
	// StartTimeout bounds a started plugin's start and handshake; 0: go-plugin's (1m).
	StartTimeout time.Duration
	// Logger is go-plugin's own log; nil: none.
	Logger hclog.Logger
	// Stdout and Stderr get what the plugin writes to os.Stdout and os.Stderr once it
	// serves (a hook's fmt.Println), which go-plugin streams over the connection; nil: it
	// is dropped.
	Stdout, Stderr io.Writer
	// ProcessStderr gets each line of the process's own standard error: sdk.Logger's JSON
	// lines (ParseLogLine) and the runtime's dying words; nil: they are dropped.
	ProcessStderr io.Writer
	// DeathCause says why the process died, when its owner can tell ("out of memory: ..."):
	// the calls its death failed say it. nil: they do not say.
	DeathCause func() string
	// Restarts says that the owner starts the plugin again on the next call: the errors of
	// the calls its death or a lost connection failed say so.
	Restarts bool
	// TracerProvider, when set, traces each call (a client span) and carries its trace
	// context to the plugin (W3C traceparent in the gRPC metadata).
	TracerProvider trace.TracerProvider
}

// Client is a connection to one plugin process and the executors it serves.
type Client struct {
	name     string
	plugin   *plugin.Client
	protocol plugin.ClientProtocol
	rpc      proto.ExecutorClient
	version  int
	// deathCause and restarts are Options'.
	deathCause func() string
	restarts   bool
}

// Start runs the plugin executable cmd names (by its path, with cmd.Env as its whole
// environment) and connects to it over gRPC with mutual TLS, speaking the highest
// protocol version both know. On error the process is killed.
func Start(cmd *exec.Cmd, opts Options) (*Client, error) {
	gp := plugin.NewClient(startConfig(cmd, opts))
	protocol, err := gp.Client()
	if err != nil {
		gp.Kill()
		return nil, fmt.Errorf("plugin %s: start and handshake failed (is it a Stepwise plugin?): %w", opts.Name, err)
	}
	c, err := dispense(gp, protocol, gp.NegotiatedVersion(), opts)
	if err != nil {
		gp.Kill()
		return nil, err
	}
	return c, nil
}

// Attach connects to a plugin that runs already, at the protocol version rc names. Kill
// never stops a plugin rc marks as a test's (Test: it is the developer's).
func Attach(rc *plugin.ReattachConfig, opts Options) (*Client, error) {
	gp := plugin.NewClient(attachConfig(rc, opts))
	protocol, err := gp.Client()
	if err != nil {
		return nil, fmt.Errorf("plugin %s: reattach to %s: %w", opts.Name, rc.Addr, err)
	}
	return dispense(gp, protocol, rc.ProtocolVersion, opts)
}

// dispense is the client of the Executor service over a connection made. It makes no
// call: whatever the caller does to the process before its first call (a memory limit) is
// in place before the plugin serves anything.
func dispense(gp *plugin.Client, protocol plugin.ClientProtocol, version int, opts Options) (*Client, error) {
	raw, err := protocol.Dispense(proto.PluginName)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: dispense the executor service: %w", opts.Name, err)
	}
	rpc, ok := raw.(proto.ExecutorClient)
	if !ok {
		return nil, fmt.Errorf("plugin %s: not an executor plugin (%T)", opts.Name, raw)
	}
	return &Client{
		name: opts.Name, plugin: gp, protocol: protocol, rpc: rpc, version: version,
		deathCause: opts.DeathCause, restarts: opts.Restarts,
	}, nil
}

// Version is the protocol version the plugin speaks.
func (c *Client) Version() int { return c.version }

// PID is the plugin's process ID; 0 when it is not known.
func (c *Client) PID() int {
	if rc := c.plugin.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

// Exited reports whether the plugin process is gone, or was killed.
func (c *Client) Exited() bool { return c.plugin.Exited() }

// Kill stops a plugin the client started: it asks it to stop, then kills it. It returns
// once it is gone.
func (c *Client) Kill() { c.plugin.Kill() }

// Close asks the plugin to stop serving and closes the connection, without killing
// anything: for a plugin served in the caller's process, which stops on its own.
func (c *Client) Close() error {
	if err := c.protocol.Close(); err != nil {
		return fmt.Errorf("plugin %s: close the connection: %w", c.name, err)
	}
	return nil
}

// exitGrace is how long a failed call waits for go-plugin to notice that the process
// exited: a killed plugin breaks its connection a moment before it is reaped.
const exitGrace = time.Second

// gone reports whether the process behind a failed call is gone, and why when its owner
// can tell, waiting up to exitGrace for its exit to be noticed.
func (c *Client) gone() (died bool, why string) {
	deadline := time.Now().Add(exitGrace)
	for !c.plugin.Exited() {
		if time.Now().After(deadline) {
			return false, ""
		}
		time.Sleep(20 * time.Millisecond)
	}
	if c.deathCause != nil {
		why = c.deathCause()
	}
	return true, why
}
