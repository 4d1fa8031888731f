// Package plugintest runs a plugin's executors through the real gRPC path of the plugin
// protocol inside `go test`, and checks the contract every executor must keep.
//
//	func TestGreet(t *testing.T) {
//		c := plugintest.Serve(t, greet{})
//		res, err := c.Run(ctx, "example.greet", sdk.HookCreate, &sdk.Request{Params: ...})
//		plugintest.Conformance(t, greet{}, map[string]string{"name": "Ada"})
//	}
package plugintest

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// Client calls executors served over gRPC.
type Client struct {
	rpc proto.ExecutorClient
}

// Serve serves the executors on a test listener with go-plugin's gRPC server and returns
// a client of it; both are stopped when the test ends.
func Serve(t testing.TB, executors ...sdk.Executor) *Client {
	t.Helper()
	client, server := plugin.TestPluginGRPCConn(t, false, proto.PluginSet(sdk.NewServer(executors...)))
	t.Cleanup(func() {
		// Stop the server first: closing the client asks the server to stop too, and two
		// concurrent Stops race inside go-plugin.
		server.Stop()
		_ = client.Close()
	})
	raw, err := client.Dispense(proto.PluginName)
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
	r := *req
	r.Hook = hook
	in, err := proto.EncodeRequest(executor, &r)
	if err != nil {
		return sdk.Result{}, err
	}
	resp, err := c.rpc.RunHook(ctx, in)
	if err != nil {
		return sdk.Result{}, err
	}
	return proto.DecodeOutcome(resp)
}

// Request returns a request for a hook of a made-up pipeline.
func Request(hook sdk.Hook, uid string, params map[string]string) *sdk.Request {
	return &sdk.Request{
		Pipeline: sdk.PipelineRef{Namespace: "default", Name: "conformance", UID: uid, Generation: 1},
		Step:     "step", Hook: hook, Params: params, Attempt: 1,
		IdempotencyKey: contract.IdempotencyKey(uid, "step", hook),
		Outputs:        map[string]map[string]string{},
	}
}

// Option tunes Conformance.
type Option func(*conformance)

type conformance struct {
	secrets map[string][]byte
}

// WithSecrets hands every hook this Secret data, as the operator does for an executor
// whose credentialsSecret (or other *Secret parameter) names a Secret.
func WithSecrets(secrets map[string][]byte) Option {
	return func(c *conformance) { c.secrets = secrets }
}

// Conformance checks, through gRPC, what the engine relies on from every executor:
// Create twice is harmless (same outcome, no error the second time); teardown of
// something never created succeeds; a cancelled context makes every hook return promptly.
// params are valid parameters for the executor.
func Conformance(t *testing.T, exec sdk.Executor, params map[string]string, opts ...Option) {
	t.Helper()
	var cfg conformance
	for _, o := range opts {
		o(&cfg)
	}
	c := Serve(t, exec)
	name := exec.Name()
	request := func(hook sdk.Hook, uid string) *sdk.Request {
		req := Request(hook, uid, params)
		req.Secrets = cfg.secrets
		return req
	}

	t.Run("DescribeNamesTheExecutor", func(t *testing.T) {
		infos, err := c.Describe(context.Background())
		if err != nil || len(infos) != 1 || infos[0].GetName() != name {
			t.Fatalf("Describe = %v, %v; want one executor %q", infos, err, name)
		}
	})

	t.Run("CreateTwiceIsHarmless", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, hook := range []sdk.Hook{sdk.HookPreCreate, sdk.HookCreate, sdk.HookPostCreate} {
			first, err := c.Run(ctx, name, hook, request(hook, "conformance-create"))
			if err != nil {
				t.Fatalf("first %s: %v", hook, err)
			}
			second, err := c.Run(ctx, name, hook, request(hook, "conformance-create"))
			if err != nil {
				t.Fatalf("second %s: %v (hooks run at least once: a repeat must succeed)", hook, err)
			}
			if first.Done && !second.Done {
				t.Errorf("%s: the first call was done, the repeat is not: %+v", hook, second)
			}
		}
	})

	t.Run("DeleteOfSomethingNeverCreatedSucceeds", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, hook := range []sdk.Hook{sdk.HookPreDelete, sdk.HookDelete, sdk.HookPostDelete} {
			if _, err := c.Run(ctx, name, hook, request(hook, "conformance-never-created")); err != nil {
				t.Errorf("%s of something never created: %v", hook, err)
			}
		}
	})

	// In process: over gRPC the client returns at cancellation whatever the executor does,
	// so this checks the executor itself.
	t.Run("CancelledContextReturnsPromptly", func(t *testing.T) {
		for _, hook := range Hooks {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = sdk.RunHook(ctx, exec, request(hook, "conformance-cancel"))
			}()
			time.Sleep(10 * time.Millisecond)
			cancel()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Errorf("%s did not return within 5s of its context being cancelled", hook)
			}
		}
	})
}
