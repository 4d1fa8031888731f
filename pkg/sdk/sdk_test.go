package sdk_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/contract"
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

// typed declares every parameter with a type, so that its declarations are complete.
type typed struct {
	sdk.Base
	calls *atomic.Int32
}

func (typed) Name() string { return "test.typed" }

func (typed) Describe() sdk.Description {
	return sdk.Description{Parameters: []sdk.Parameter{
		{Name: "count", Type: sdk.ParamInt, Required: true},
		{Name: "mode", Type: sdk.ParamEnum, Values: []string{"fast", "slow"}, Default: "fast"},
		{Name: "timeout", Type: sdk.ParamDuration, Default: "90s"},
		{Name: "target", Type: sdk.ParamURL},
	}}
}

func (e typed) Create(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	e.calls.Add(1)
	return sdk.DoneWithOutputs("ok", map[string]string{
		"count": strconv.FormatInt(req.Int("count"), 10), "mode": req.String("mode"), "timeout": req.Duration("timeout").String(),
	}), nil
}

func (e typed) Delete(ctx context.Context, req *sdk.Request) (sdk.Result, error) {
	return e.Create(ctx, req)
}

func TestParametersAreCheckedBeforeTheHook(t *testing.T) {
	tests := []struct {
		name        string
		params      map[string]string
		wantErr     string // the exact message; empty: the hook runs
		wantOutputs map[string]string
	}{
		{name: "missing required", params: nil, wantErr: `parameter "count" is required`},
		{name: "not an int", params: map[string]string{"count": "three"}, wantErr: `parameter "count" is "three", not a whole number`},
		{
			name: "not one of the enum's values", params: map[string]string{"count": "3", "mode": "medium"},
			wantErr: `parameter "mode" is "medium", not one of fast, slow`,
		},
		{
			name: "not a duration", params: map[string]string{"count": "3", "timeout": "soon"},
			wantErr: `parameter "timeout" is "soon", not a duration such as 90s or 10m`,
		},
		{
			name: "not an http URL, not repeated", params: map[string]string{"count": "3", "target": "ftp://user:pw@host/x"},
			wantErr: `parameter "target" is not an absolute http or https URL`,
		},
		{
			name: "not declared", params: map[string]string{"count": "3", "colour": "red"},
			wantErr: `parameter "colour" is not a parameter of the executor, which takes count, mode, timeout, target`,
		},
		{
			name: "defaults reach the hook", params: map[string]string{"count": "3"},
			wantOutputs: map[string]string{"count": "3", "mode": "fast", "timeout": "1m30s"},
		},
		{
			name: "set values win over defaults", params: map[string]string{"count": "-1", "mode": "slow", "timeout": "10m"},
			wantOutputs: map[string]string{"count": "-1", "mode": "slow", "timeout": "10m0s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := typed{calls: &atomic.Int32{}}
			c := plugintest.Serve(t, e)
			res, err := c.Run(t.Context(), "test.typed", sdk.HookCreate, plugintest.Request(sdk.HookCreate, "u", tt.params))
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.wantOutputs, res.Outputs)
				assert.Equal(t, int32(1), e.calls.Load())
				return
			}
			var se *sdk.Error
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.wantErr, err.Error())
			assert.Equal(t, sdk.ReasonInvalidParameter, se.Reason)
			assert.True(t, se.Permanent)
			assert.Zero(t, e.calls.Load(), "the hook is not called")
		})
	}
}

// TestTeardownIsNotRefused: the engine tears down what was created under older
// declarations (a parameter since required, a value since refused); the SDK too.
func TestTeardownIsNotRefused(t *testing.T) {
	e := typed{calls: &atomic.Int32{}}
	res, err := plugintest.Serve(t, e).Run(t.Context(), "test.typed", sdk.HookDelete,
		plugintest.Request(sdk.HookDelete, "u", map[string]string{"mode": "medium", "colour": "red"}))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"count": "0", "mode": "medium", "timeout": "1m30s"}, res.Outputs, "with the defaults")
	assert.Equal(t, int32(1), e.calls.Load())
}

// caller calls the URL kept in its Secret and returns what net/http answers as it is: a
// *url.Error quoting the URL, or the URL in its message, outputs and state.
type caller struct{ sdk.Base }

func (caller) Name() string { return "test.caller" }

func (caller) Create(ctx context.Context, req *sdk.Request) (sdk.Result, error) {
	target := string(req.Secrets["url"])
	if target == "" {
		target = string(req.Secret("webhookSecret")["url"])
	}
	if req.Params["mode"] == "echo" {
		return sdk.Wait(time.Second, "calling "+target).WithState(map[string]string{"target": target}), nil
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, target, nil)
	if err != nil {
		return sdk.Result{}, err
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(httpReq)
	if err != nil {
		return sdk.Result{}, sdk.Retryable("Unreachable", err) // the raw *url.Error inside
	}
	_ = resp.Body.Close()
	return sdk.Done("called"), nil
}

func TestSecretsNeverLeaveThePlugin(t *testing.T) {
	// Nothing listens on port 1: net/http's error quotes the URL, token and all.
	const (
		token      = "xoxb-SECRET-token-123"
		queryToken = "qtoken-abc123"
		password   = "hunter2pass"
	)
	plain := "http://127.0.0.1:1/services/T0B1/" + token + "?token=" + queryToken
	withUser := "http://bot:" + password + "@127.0.0.1:1/hook/" + token + "?token=" + queryToken
	tests := []struct {
		name    string
		url     string
		byParam bool // in Request.SecretParams only, not in Request.Secrets
		mode    string
		pieces  []string
	}{
		{name: "a url.Error", url: plain, pieces: []string{token, queryToken, "/services/T0B1/" + token, plain}},
		{name: "a url.Error, the Secret by parameter", url: plain, byParam: true, pieces: []string{token, queryToken, plain}},
		{name: "a url.Error with a password", url: withUser, pieces: []string{password, token, queryToken, "/hook/" + token, withUser}},
		{name: "message and state", url: plain, mode: "echo", pieces: []string{token, queryToken, plain}},
	}
	c := plugintest.Serve(t, caller{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := plugintest.Request(sdk.HookCreate, "u", map[string]string{"webhookSecret": "hook", "mode": tt.mode})
			data := map[string][]byte{"url": []byte(tt.url)}
			if tt.byParam {
				req.SecretParams = map[string]map[string][]byte{"webhookSecret": data}
			} else {
				req.Secrets = data
			}
			res, err := c.Run(t.Context(), "test.caller", sdk.HookCreate, req)
			var text string
			if tt.mode == "echo" {
				require.NoError(t, err)
				text = res.Message + " " + res.State["target"]
				assert.Contains(t, res.Message, contract.Redacted)
			} else {
				var se *sdk.Error
				require.ErrorAs(t, err, &se)
				assert.Equal(t, "Unreachable", se.Reason, "the reason is kept")
				assert.False(t, se.Permanent)
				text = err.Error()
				assert.Contains(t, text, "connection refused", "the rest of the error is kept")
			}
			for _, piece := range tt.pieces {
				assert.NotContains(t, text, piece)
			}
		})
	}
}

// panicky panics with a Secret in its panic value.
type panicky struct{ sdk.Base }

func (panicky) Name() string { return "test.panicky" }

func (panicky) Create(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	panic("cannot use key " + string(req.Secrets["key"]))
}

func TestAPanicsTextIsRedacted(t *testing.T) {
	req := plugintest.Request(sdk.HookCreate, "u", nil)
	req.Secrets = map[string][]byte{"key": []byte("sk-live-0123456789")}
	_, err := plugintest.Serve(t, panicky{}).Run(t.Context(), "test.panicky", sdk.HookCreate, req)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "panicked")
	assert.NotContains(t, err.Error(), "sk-live-0123456789")
}
