// Package plugintest runs a plugin's executors through the real gRPC path of the plugin
// protocol inside `go test`, drives hooks that wait as the engine does, and checks the
// contract every executor must keep.
//
//	func TestGreet(t *testing.T) {
//		c := plugintest.Serve(t, greet{})
//		res, err := c.Run(ctx, "example.greet", sdk.HookCreate, plugintest.Request(sdk.HookCreate, "uid", params))
//		d := plugintest.Drive(t, c, "example.greet", sdk.HookCreate, plugintest.Request(sdk.HookCreate, "uid", params))
//		plugintest.Conformance(t, greet{}, map[string]string{"name": "Ada"})
//	}
//
// The plugin is served as sdk.Serve serves it (go-plugin's gRPC server, the SDK's checks
// and redaction), in the test's process; its Logger lines and go-plugin's warnings go to
// the test's log, shown when a test fails or with -v.
package plugintest

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// Runner runs one hook of an executor: a *Client over gRPC, or InProcess.
type Runner interface {
	Run(ctx context.Context, executor string, hook sdk.Hook, req *sdk.Request) (sdk.Result, error)
}

// Client calls executors served over gRPC.
type Client struct {
	rpc proto.ExecutorClient
}

var _ Runner = (*Client)(nil)

// stopTimeout bounds how long the end of a test waits for the plugin to stop.
const stopTimeout = 10 * time.Second

// Serve serves the executors as sdk.Serve does, in go-plugin's test mode in this process,
// and returns a client of them attached as the operator attaches (go-plugin's client,
// protocol versions negotiated); both stop when the test ends.
func Serve(t testing.TB, executors ...sdk.Executor) *Client {
	t.Helper()
	logs := newTestLog(t)
	ctx, cancel := context.WithCancel(context.Background())
	reattach, stopped, err := sdk.ServeInProcess(ctx, logs, executors...)
	if err != nil {
		cancel()
		t.Fatalf("serve the executors: %v", err)
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: proto.Handshake,
		// A client that attaches takes the plugin's version as it is, and the set of
		// Plugins (not VersionedPlugins): the operator's, for that version.
		Plugins:          proto.VersionedPlugins(nil)[reattach.ProtocolVersion],
		Reattach:         reattach,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		// go-plugin's own debug lines would drown a failing test's output.
		Logger: hclog.New(&hclog.LoggerOptions{Name: "plugintest", Level: hclog.Warn, Output: logs}),
	})
	t.Cleanup(func() {
		// Closing the client asks the server to stop (one Stop: two concurrent ones race
		// inside go-plugin); cancelling is for a server that did not hear it.
		if rpc, err := client.Client(); err == nil {
			_ = rpc.Close()
		}
		select {
		case <-stopped:
		case <-time.After(stopTimeout):
			cancel()
			<-stopped
		}
		cancel()
	})
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("connect to the executors: %v", err)
	}
	raw, err := rpc.Dispense(proto.PluginName)
	if err != nil {
		t.Fatalf("dispense: %v", err)
	}
	return &Client{rpc: raw.(proto.ExecutorClient)}
}

// Describe returns what the plugin says about its executors.
func (c *Client) Describe(ctx context.Context) ([]*proto.ExecutorInfo, error) {
	resp, err := c.rpc.Describe(ctx, &proto.DescribeRequest{})
	return resp.GetExecutors(), err
}

// Hooks are the six hooks in the order a pipeline runs them.
var Hooks = []sdk.Hook{sdk.HookPreCreate, sdk.HookCreate, sdk.HookPostCreate, sdk.HookPreDelete, sdk.HookDelete, sdk.HookPostDelete}

// Run runs one hook of the named executor. An error the executor returned comes back as
// an *sdk.Error (Permanent, Reason); a transport error as it is.
func (c *Client) Run(ctx context.Context, executor string, hook sdk.Hook, req *sdk.Request) (sdk.Result, error) {
	in, err := encode(executor, hook, req)
	if err != nil {
		return sdk.Result{}, err
	}
	resp, err := c.rpc.RunHook(ctx, in)
	if err != nil {
		return sdk.Result{}, err
	}
	return proto.DecodeOutcome(resp)
}

// InProcess runs the executors' hooks in the calling goroutine, through the SDK's server
// and the protocol's codec but without gRPC: what a hook does with its context is seen
// as it is (over gRPC, the client returns at cancellation whatever the hook does). The
// hooks' Logger writes to the test's log.
func InProcess(t testing.TB, executors ...sdk.Executor) Runner {
	return inProcess{server: sdk.NewServerWithLogs(newTestLog(t), executors...)}
}

type inProcess struct{ server proto.ExecutorServer }

func (p inProcess) Run(ctx context.Context, executor string, hook sdk.Hook, req *sdk.Request) (sdk.Result, error) {
	in, err := encode(executor, hook, req)
	if err != nil {
		return sdk.Result{}, err
	}
	resp, err := p.server.RunHook(ctx, in)
	if err != nil {
		return sdk.Result{}, err
	}
	return proto.DecodeOutcome(resp)
}

// encode is the protocol's request to run hook with req.
func encode(executor string, hook sdk.Hook, req *sdk.Request) (*proto.RunHookRequest, error) {
	r := *req
	r.Hook = hook
	return proto.EncodeRequest(executor, &r)
}

// Request returns the request of the first call of a hook of a made-up pipeline, started
// now.
func Request(hook sdk.Hook, uid string, params map[string]string) *sdk.Request {
	return &sdk.Request{
		Pipeline: sdk.PipelineRef{Namespace: "default", Name: "conformance", UID: uid, Generation: 1},
		Step:     "step", Hook: hook, Params: params, Attempt: 1,
		IdempotencyKey: contract.IdempotencyKey(uid, "step", hook),
		Outputs:        map[string]map[string]string{},
		HookStarted:    time.Now(),
	}
}
