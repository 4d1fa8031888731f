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
// and redaction), in the test's process, and called through the operator's own client
// (pkg/plugin/client); its Logger lines and go-plugin's warnings go to the test's log,
// shown when a test fails or with -v.
package plugintest

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/plugin/client"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// Runner runs one hook of an executor: a *Client over gRPC, or InProcess.
type Runner interface {
	Run(ctx context.Context, executor string, hook sdk.Hook, req *sdk.Request) (sdk.Result, error)
}

// Client calls executors served over gRPC, through the operator's own client of a plugin
// (pkg/plugin/client).
type Client struct {
	c *client.Client
}

var _ Runner = (*Client)(nil)

// stopTimeout bounds how long the end of a test waits for the plugin to stop.
const stopTimeout = 10 * time.Second

// Serve serves the executors as sdk.Serve does, in go-plugin's test mode in this process,
// and returns a client of them attached as the operator attaches (the operator's client,
// protocol versions negotiated); both stop when the test ends.
func Serve(t testing.TB, executors ...sdk.Executor) *Client {
	t.Helper()
	return serve(t, newTestLog(t), executors...)
}

// serve is Serve with the plugin's log written to logs.
func serve(t testing.TB, logs io.Writer, executors ...sdk.Executor) *Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	reattach, stopped, err := sdk.ServeInProcess(ctx, logs, executors...)
	if err != nil {
		cancel()
		t.Fatalf("serve the executors: %v", err)
	}
	c, err := client.Attach(reattach, client.Options{
		Name: "under test",
		// go-plugin's own debug lines would drown a failing test's output.
		Logger: hclog.New(&hclog.LoggerOptions{Name: "plugintest", Level: hclog.Warn, Output: logs}),
	})
	t.Cleanup(func() {
		// Closing the client asks the server to stop (one Stop: two concurrent ones race
		// inside go-plugin); cancelling is for a server that did not hear it.
		if c != nil {
			_ = c.Close()
		}
		select {
		case <-stopped:
		case <-time.After(stopTimeout):
			cancel()
			<-stopped
		}
		cancel()
	})
	if err != nil {
		t.Fatalf("connect to the executors: %v", err)
	}
	return &Client{c: c}
}

// Describe returns what the plugin says about its executors, in the protocol's terms.
func (c *Client) Describe(ctx context.Context) ([]*proto.ExecutorInfo, error) {
	served, err := c.c.Describe(ctx)
	if err != nil {
		return nil, err
	}
	infos := make([]*proto.ExecutorInfo, 0, len(served))
	for _, e := range served {
		infos = append(infos, proto.EncodeDescription(e.Name, e.Description))
	}
	return infos, nil
}

// Hooks are the six hooks in the order a pipeline runs them (contract.AllHooks).
var Hooks = contract.AllHooks()

// Run runs one hook of the named executor. An error the executor returned comes back as
// an *sdk.Error (Permanent, Reason); a failed call as the operator's client maps it (an
// *sdk.Error too, inside a *client.CallError).
func (c *Client) Run(ctx context.Context, executor string, hook sdk.Hook, req *sdk.Request) (sdk.Result, error) {
	return c.c.Run(ctx, executor, withHook(req, hook))
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
	in, err := proto.EncodeRequest(executor, withHook(req, hook))
	if err != nil {
		return sdk.Result{}, err
	}
	resp, err := p.server.RunHook(ctx, in)
	if err != nil {
		return sdk.Result{}, err
	}
	return proto.DecodeOutcome(resp)
}

// withHook is a copy of req for hook.
func withHook(req *sdk.Request, hook sdk.Hook) *sdk.Request {
	r := *req
	r.Hook = hook
	return &r
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
