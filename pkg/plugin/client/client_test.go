package client

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// echo answers Create with its parameters and fails Delete for good; it plans one row.
type echo struct{ sdk.Base }

func (echo) Name() string { return "test.echo" }

func (echo) Describe() sdk.Description {
	return sdk.Description{Version: "v1.2.3", Parameters: []sdk.Parameter{
		{Name: "name", Type: sdk.ParamString, Required: true},
		{Name: "count", Type: sdk.ParamInt, Default: "1"},
	}}
}

func (echo) Create(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	return sdk.DoneWithOutputs("echoed", map[string]string{"name": req.String("name"), "count": req.Params["count"]}), nil
}

func (echo) Delete(context.Context, *sdk.Request) (sdk.Result, error) {
	return sdk.Result{}, sdk.Permanent("Gone", errors.New("never there"))
}

func (echo) Plan(_ context.Context, req *sdk.Request) (sdk.Plan, error) {
	return sdk.Plan{Summary: "would echo " + req.Params["name"]}, nil
}

// attach serves the executors in this process and attaches a client to them, as
// plugintest does.
func attach(t *testing.T, executors ...sdk.Executor) *Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	reattach, stopped, err := sdk.ServeInProcess(ctx, io.Discard, executors...)
	require.NoError(t, err)
	c, err := Attach(reattach, Options{Name: "stepwise-plugin-test"})
	t.Cleanup(func() {
		if c != nil {
			_ = c.Close()
		}
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
		}
		cancel()
	})
	require.NoError(t, err)
	return c
}

func request(hook contract.Hook, params map[string]string) *contract.Request {
	return &contract.Request{
		Pipeline: contract.PipelineRef{Namespace: "ns", Name: "p", UID: "uid-1", Generation: 1},
		Step:     "step", Hook: hook, Params: params, Attempt: 1,
		IdempotencyKey: contract.IdempotencyKey("uid-1", "step", hook),
	}
}

// TestCallsInTheContractsTerms: Describe, Run and Plan over one connection, and how far
// each failed call got.
func TestCallsInTheContractsTerms(t *testing.T) {
	c := attach(t, echo{})
	ctx := context.Background()
	assert.Equal(t, proto.Latest, c.Version())

	served, err := c.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, []Executor{{Name: "test.echo", Description: contract.Description{Version: "v1.2.3", Parameters: []contract.Parameter{
		{Name: "name", Type: contract.ParamString, Required: true},
		{Name: "count", Type: contract.ParamInt, Default: "1"},
	}}}}, served)

	res, err := c.Run(ctx, "test.echo", request(contract.HookCreate, map[string]string{"name": "Ada"}))
	require.NoError(t, err)
	assert.Equal(t, contract.DoneWithOutputs("echoed", map[string]string{"name": "Ada", "count": "1"}), res)

	_, err = c.Run(ctx, "test.echo", request(contract.HookDelete, nil))
	require.Error(t, err)
	assert.Equal(t, Answered, StageOf(err), "the hook's own error")
	assert.Equal(t, "Gone", contract.OwnReason(err))
	assert.True(t, contract.IsPermanent(err))

	big := request(contract.HookCreate, map[string]string{"name": "Ada"})
	big.Secrets = map[string][]byte{"blob": []byte(strings.Repeat("x", proto.MaxMessageSize))}
	_, err = c.Run(ctx, "test.echo", big)
	require.Error(t, err)
	assert.Equal(t, NotSent, StageOf(err))
	assert.Equal(t, proto.ReasonMessageTooLarge, contract.OwnReason(err))
	assert.True(t, contract.IsPermanent(err))

	plan, err := c.Plan(ctx, "test.echo", request("", map[string]string{"name": "Ada"}))
	require.NoError(t, err)
	assert.Equal(t, "would echo Ada", plan.Summary)

	expired, cancel := context.WithTimeout(ctx, -1)
	defer cancel()
	_, err = c.Run(expired, "test.echo", request(contract.HookCreate, map[string]string{"name": "Ada"}))
	require.Error(t, err)
	assert.Equal(t, NoAnswer, StageOf(err))
	assert.Equal(t, contract.ReasonTimeout, contract.OwnReason(err))
	assert.False(t, c.Exited())
}

// TestUnknownProtocolHookFailsForGood: a hook of the protocol the plugin does not know (a
// newer host's) fails for good with reason UnknownHook, as an unknown hook does in
// process.
func TestUnknownProtocolHookFailsForGood(t *testing.T) {
	c := attach(t, echo{})
	in, err := proto.EncodeRequest("test.echo", request(contract.HookCreate, nil))
	require.NoError(t, err)
	in.Hook = proto.Hook(99)
	resp, err := c.rpc.RunHook(context.Background(), in)
	require.NoError(t, err)
	_, err = proto.DecodeOutcome(resp)
	require.Error(t, err)
	assert.Equal(t, contract.ReasonUnknownHook, contract.OwnReason(err))
	assert.True(t, contract.IsPermanent(err))
}

// TestPlanOfAnOlderProtocol: a plugin before protocol version 3 cannot plan; it would run,
// with no details, and is not asked.
func TestPlanOfAnOlderProtocol(t *testing.T) {
	c := &Client{name: "stepwise-plugin-v2", rpc: noOutcomeRPC{}, version: proto.Version2}
	p, err := c.Plan(context.Background(), "x.do", request("", nil))
	require.NoError(t, err)
	assert.Equal(t, contract.NoPlan(), p)
}

// TestAnswerWithoutOutcome: an answer with neither a result nor an error is a retryable
// PluginProtocolError of a plugin that answered.
func TestAnswerWithoutOutcome(t *testing.T) {
	c := &Client{name: "stepwise-plugin-x", rpc: noOutcomeRPC{}, version: proto.Latest}
	_, err := c.Run(context.Background(), "x.do", request(contract.HookCreate, nil))
	assert.Equal(t, NoOutcome, StageOf(err))
	assert.Equal(t, ReasonPluginProtocolError, contract.OwnReason(err))
	assert.False(t, contract.IsPermanent(err))
	_, err = c.Plan(context.Background(), "x.do", request("", nil))
	assert.Equal(t, NoOutcome, StageOf(err))
	assert.ErrorIs(t, err, proto.ErrNoOutcome)
}

// noOutcomeRPC answers every call with an empty message.
type noOutcomeRPC struct{}

func (noOutcomeRPC) Describe(context.Context, *proto.DescribeRequest, ...grpc.CallOption) (*proto.DescribeResponse, error) {
	return &proto.DescribeResponse{}, nil
}

func (noOutcomeRPC) RunHook(context.Context, *proto.RunHookRequest, ...grpc.CallOption) (*proto.RunHookResponse, error) {
	return &proto.RunHookResponse{}, nil
}

func (noOutcomeRPC) Plan(context.Context, *proto.RunHookRequest, ...grpc.CallOption) (*proto.PlanResponse, error) {
	return &proto.PlanResponse{}, nil
}
