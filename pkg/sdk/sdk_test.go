package sdk_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

type hooks struct{ sdk.Base }

func (hooks) Name() string { return "test.hooks" }

func (hooks) Describe() sdk.Description {
	return sdk.Description{Version: "v1", Description: "d", Parameters: []sdk.Parameter{{Name: "p", Description: "pd"}}}
}

func (hooks) Create(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	switch req.Params["mode"] {
	case "wait":
		return sdk.Wait(time.Second, "waiting"), nil
	case "retry":
		return sdk.Result{}, sdk.Retryable("Busy", errors.New("busy"))
	case "plain":
		return sdk.Result{}, errors.New("plain")
	case "panic":
		panic("boom")
	}
	return sdk.DoneWithOutputs("ok", map[string]string{
		"step": req.Step, "secret": string(req.Secrets["k"]), "earlier": req.Outputs["a"]["b"],
	}), nil
}

func TestServerTranslatesEverything(t *testing.T) {
	c := plugintest.Serve(t, hooks{})
	ctx := context.Background()
	infos, err := c.Describe(ctx)
	require.NoError(t, err)
	require.Len(t, infos, 1)
	assert.Equal(t, "test.hooks", infos[0].GetName())
	assert.Equal(t, "v1", infos[0].GetVersion())
	assert.Equal(t, "pd", infos[0].GetParameters()[0].GetDescription())
	assert.False(t, infos[0].GetParameters()[0].GetRequired())

	for _, h := range plugintest.Hooks {
		res, err := c.Run(ctx, "test.hooks", h, plugintest.Request(h, "u", nil))
		require.NoError(t, err, h)
		assert.True(t, res.Done, h)
	}
	req := plugintest.Request(sdk.HookCreate, "u", nil)
	req.Secrets = map[string][]byte{"k": []byte("v")}
	req.Outputs = map[string]map[string]string{"a": {"b": "c"}}
	res, err := c.Run(ctx, "test.hooks", sdk.HookCreate, req)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"step": "step", "secret": "v", "earlier": "c"}, res.Outputs)

	res, err = c.Run(ctx, "test.hooks", sdk.HookCreate, plugintest.Request(sdk.HookCreate, "u", map[string]string{"mode": "wait"}))
	require.NoError(t, err)
	assert.Equal(t, sdk.Result{RequeueAfter: time.Second, Message: "waiting"}, res)

	for mode, want := range map[string]sdk.Error{
		"retry": {Reason: "Busy"}, "plain": {Reason: "HookFailed"}, "panic": {Reason: "HookFailed"},
	} {
		_, err = c.Run(ctx, "test.hooks", sdk.HookCreate, plugintest.Request(sdk.HookCreate, "u", map[string]string{"mode": mode}))
		var e *sdk.Error
		require.ErrorAs(t, err, &e, mode)
		assert.Equal(t, want.Reason, e.Reason, mode)
		assert.False(t, e.Permanent, mode)
	}

	_, err = c.Run(ctx, "nope", sdk.HookCreate, plugintest.Request(sdk.HookCreate, "u", nil))
	var e *sdk.Error
	require.ErrorAs(t, err, &e)
	assert.True(t, e.Permanent)
	assert.Equal(t, "UnknownExecutor", e.Reason)
}

func TestConformanceOfBase(t *testing.T) {
	plugintest.Conformance(t, hooks{}, nil)
}

// TestUnknownHookIsRefusedAsTheEngineRefusesIt: the SDK's dispatcher used to run
// PostDelete for a hook it did not know, where the engine's fails with UnknownHook; both
// are now contract.RunHook. In process and over gRPC, the answer is the same.
func TestUnknownHookIsRefusedAsTheEngineRefusesIt(t *testing.T) {
	req := plugintest.Request("Frobnicate", "uid-1", nil)
	_, inProcess := sdk.RunHook(context.Background(), hooks{}, req)
	_, overGRPC := plugintest.Serve(t, hooks{}).Run(context.Background(), "test.hooks", "Frobnicate", req)
	for name, err := range map[string]error{"in process": inProcess, "over gRPC": overGRPC} {
		var e *sdk.Error
		require.ErrorAs(t, err, &e, name)
		assert.Equal(t, "UnknownHook", e.Reason, name)
		assert.True(t, e.Permanent, name)
	}
}
