package plugintest_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

// waiter's Create waits, 10s at a time, until 30s have passed since the hook started,
// counting its calls in its state; mode changes how it ends.
type waiter struct{ sdk.Base }

func (waiter) Name() string { return "test.waiter" }

func (waiter) Create(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	polls, _ := strconv.Atoi(req.State["polls"])
	polls++
	state := map[string]string{"polls": strconv.Itoa(polls)}
	switch req.Params["mode"] {
	case "fail":
		if polls == 2 {
			return sdk.Result{}, sdk.Retryable("Busy", errors.New("busy"))
		}
	case "forever":
		return sdk.Wait(10*time.Second, "still waiting").WithState(state), nil
	case "big state":
		for i := range sdk.MaxStateEntries {
			state["k"+strconv.Itoa(i)] = "v"
		}
		return sdk.Wait(10*time.Second, "waiting").WithState(state), nil
	}
	if time.Since(req.HookStarted) > 30*time.Second {
		return sdk.DoneWithOutputs("waited", map[string]string{
			"polls": strconv.Itoa(polls), "sawOperation": req.Outputs[req.Step]["operation"],
		}), nil
	}
	res := sdk.Wait(10*time.Second, "waiting").WithState(state)
	res.Outputs = map[string]string{"operation": "op-" + strconv.Itoa(polls)}
	return res, nil
}

func TestDrive(t *testing.T) {
	runners := map[string]func(t *testing.T) plugintest.Runner{
		"over gRPC":  func(t *testing.T) plugintest.Runner { return plugintest.Serve(t, waiter{}) },
		"in process": func(t *testing.T) plugintest.Runner { return plugintest.InProcess(t, waiter{}) },
	}
	tests := []struct {
		name        string
		mode        string
		opts        []plugintest.DriveOption
		wantPolls   int
		wantWaited  time.Duration
		wantErr     string // contained in the error; empty: done
		wantOutputs map[string]string
	}{
		{
			name: "waits until done, its state and outputs carried", wantPolls: 4, wantWaited: 30 * time.Second,
			// The last wait's operation, seen by the call that is done.
			wantOutputs: map[string]string{"operation": "op-3", "polls": "4", "sawOperation": "op-3"},
		},
		{name: "stops at an error", mode: "fail", wantPolls: 2, wantWaited: 10 * time.Second, wantErr: "busy"},
		{
			name: "stops at the bound", mode: "forever", opts: []plugintest.DriveOption{plugintest.MaxPolls(5)},
			wantPolls: 5, wantWaited: 50 * time.Second, wantErr: `not done after 5 calls (50s waited); last message "still waiting"`,
		},
		{name: "refuses a state the engine cannot keep", mode: "big state", wantPolls: 1, wantErr: "17 state entries of 60 bytes; a step keeps at most 16 state entries"},
	}
	for runner, newRunner := range runners {
		for _, tt := range tests {
			t.Run(runner+"/"+tt.name, func(t *testing.T) {
				polls := 0
				opts := append([]plugintest.DriveOption{plugintest.OnCall(func(poll int, _ sdk.Result, _ error) {
					polls++
					assert.Equal(t, polls, poll)
				})}, tt.opts...)
				req := plugintest.Request(sdk.HookCreate, "u", map[string]string{"mode": tt.mode})
				got := plugintest.Drive(t, newRunner(t), "test.waiter", sdk.HookCreate, req, opts...)
				assert.Equal(t, tt.wantPolls, got.Polls)
				assert.Equal(t, tt.wantPolls, polls, "OnCall saw every call")
				assert.Equal(t, tt.wantWaited, got.Waited)
				if tt.wantErr != "" {
					require.Error(t, got.Err)
					assert.Contains(t, got.Err.Error(), tt.wantErr)
					return
				}
				require.NoError(t, got.Err)
				assert.True(t, got.Result.Done)
				assert.Equal(t, tt.wantOutputs, got.Outputs)
				assert.Empty(t, req.State, "the caller's request is left as it was")
			})
		}
	}
}

func TestDriveStartsFromTheRequestsStartTime(t *testing.T) {
	req := plugintest.Request(sdk.HookCreate, "u", nil)
	req.HookStarted = time.Now().Add(-25 * time.Second) // waited 25s already
	got := plugintest.Drive(t, plugintest.InProcess(t, waiter{}), "test.waiter", sdk.HookCreate, req)
	require.NoError(t, got.Err)
	assert.Equal(t, 2, got.Polls)
	assert.Equal(t, 10*time.Second, got.Waited)
}
