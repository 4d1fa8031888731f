package client

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
)

// TestCallError: the one mapping of a failed gRPC call to the contract's error, which the
// host, `plugin run` and plugintest share. Whether the process died is asked only when the
// code leaves it open (asking waits up to a second).
func TestCallError(t *testing.T) {
	expired, cancelExpired := context.WithTimeout(context.Background(), -1)
	defer cancelExpired()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	hook := callSite{plugin: "stepwise-plugin-x", executor: "x.do"}
	restarting := callSite{plugin: "stepwise-plugin-x", executor: "x.do", restarts: true}
	describe := callSite{plugin: "stepwise-plugin-x"}
	alive := func() (bool, string) { return false, "" }
	dead := func(why string) func() (bool, string) { return func() (bool, string) { return true, why } }

	tests := []struct {
		name string
		ctx  context.Context
		site callSite
		err  error
		// gone is nil when the mapping must not ask.
		gone          func() (bool, string)
		wantText      string
		wantReason    string
		wantPermanent bool
		wantIs        error
	}{
		{
			name: "the caller's deadline passed", ctx: expired, site: hook, err: status.Error(codes.DeadlineExceeded, "deadline"),
			wantText: "plugin stepwise-plugin-x: executor x.do: context deadline exceeded", wantReason: contract.ReasonTimeout, wantIs: context.DeadlineExceeded,
		},
		{
			name: "the caller cancelled", ctx: cancelled, site: hook, err: status.Error(codes.Canceled, "canceled"),
			wantText: "plugin stepwise-plugin-x: executor x.do: context canceled", wantIs: context.Canceled,
		},
		{
			name: "the deadline, seen by the plugin first", site: hook, err: status.Error(codes.DeadlineExceeded, "deadline"),
			wantText: "plugin stepwise-plugin-x: context deadline exceeded", wantReason: contract.ReasonTimeout, wantIs: context.DeadlineExceeded,
		},
		{
			name: "cancelled on the plugin's side", site: hook, err: status.Error(codes.Canceled, "canceled"),
			wantText: "plugin stepwise-plugin-x: context canceled", wantIs: context.Canceled,
		},
		{
			name: "a message over gRPC's limit", site: hook, err: status.Error(codes.ResourceExhausted, "grpc: received message larger than max"),
			wantText:   "plugin stepwise-plugin-x: executor x.do: grpc: received message larger than max",
			wantReason: proto.ReasonMessageTooLarge, wantPermanent: true,
		},
		{
			name: "died, and its owner knows why and restarts it", site: restarting, err: status.Error(codes.Unavailable, "error reading from server: EOF"),
			gone:       dead("out of memory: over its limit of 128Mi"),
			wantText:   "plugin stepwise-plugin-x died during the hook, out of memory: over its limit of 128Mi (it is restarted on the next call): error reading from server: EOF",
			wantReason: ReasonPluginUnavailable,
		},
		{
			name: "died, nobody restarts it", site: hook, err: status.Error(codes.Unavailable, "error reading from server: EOF"), gone: dead(""),
			wantText: "plugin stepwise-plugin-x died during the hook: error reading from server: EOF", wantReason: ReasonPluginUnavailable,
		},
		{
			name: "died with any code", site: hook, err: status.Error(codes.Internal, "stream terminated"), gone: dead(""),
			wantText: "plugin stepwise-plugin-x died during the hook: stream terminated", wantReason: ReasonPluginUnavailable,
		},
		{
			name: "died during Describe", site: describe, err: status.Error(codes.Unavailable, "EOF"), gone: dead(""),
			wantText: "plugin stepwise-plugin-x died during Describe: EOF", wantReason: ReasonPluginUnavailable,
		},
		{
			name: "alive but unreachable", site: restarting, err: status.Error(codes.Unavailable, "connection refused"), gone: alive,
			wantText: "plugin stepwise-plugin-x: connection lost (it is restarted on the next call): connection refused", wantReason: ReasonPluginUnavailable,
		},
		{
			name: "alive but unreachable, nobody restarts it", site: hook, err: status.Error(codes.Unavailable, "connection refused"), gone: alive,
			wantText: "plugin stepwise-plugin-x: connection lost: connection refused", wantReason: ReasonPluginUnavailable,
		},
		{
			name: "an answer of this call alone broke the protocol", site: restarting, err: status.Error(codes.Internal, "grpc: error while marshaling: string field contains invalid UTF-8"),
			gone:       alive,
			wantText:   "plugin stepwise-plugin-x: executor x.do: grpc: error while marshaling: string field contains invalid UTF-8",
			wantReason: ReasonPluginProtocolError, wantPermanent: true,
		},
		{
			name: "Describe broke the protocol", site: describe, err: status.Error(codes.Unimplemented, "unknown method Describe"), gone: alive,
			wantText: "plugin stepwise-plugin-x: describe: unknown method Describe", wantReason: ReasonPluginProtocolError, wantPermanent: true,
		},
		{
			name: "not a gRPC status", site: hook, err: errors.New("boom"), gone: alive,
			wantText: "plugin stepwise-plugin-x: executor x.do: boom", wantReason: ReasonPluginProtocolError, wantPermanent: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			asked := false
			gone := func() (bool, string) {
				asked = true
				if tt.gone == nil {
					return false, ""
				}
				return tt.gone()
			}
			err := callError(ctx, tt.site, tt.err, gone)
			assert.Equal(t, tt.wantText, err.Error())
			assert.Equal(t, tt.wantReason, contract.OwnReason(err))
			assert.Equal(t, tt.wantPermanent, contract.IsPermanent(err))
			assert.Equal(t, NoAnswer, StageOf(err))
			assert.False(t, StageOf(err).Reached())
			assert.Equal(t, tt.gone != nil, asked, "whether the mapping asked if the process died")
			if tt.wantIs != nil {
				assert.ErrorIs(t, err, tt.wantIs)
			}
		})
	}
}

func TestStageOf(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		want        Stage
		wantReached bool
	}{
		{name: "no error", want: Answered, wantReached: true},
		{name: "the hook's own error", err: contract.Permanent("InvalidParameter", errors.New("bad")), want: Answered, wantReached: true},
		{name: "not sent", err: &CallError{Stage: NotSent, Err: errors.New("too large")}, want: NotSent},
		{name: "no answer, wrapped", err: fmt.Errorf("calling: %w", &CallError{Stage: NoAnswer, Err: errors.New("EOF")}), want: NoAnswer},
		{name: "no outcome", err: noOutcome("p", proto.ErrNoOutcome), want: NoOutcome, wantReached: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, StageOf(tt.err))
			assert.Equal(t, tt.wantReached, StageOf(tt.err).Reached())
		})
	}
	err := noOutcome("stepwise-plugin-x", proto.ErrNoOutcome)
	assert.Equal(t, "plugin stepwise-plugin-x: "+proto.ErrNoOutcome.Error(), err.Error())
	assert.Equal(t, ReasonPluginProtocolError, contract.OwnReason(err))
	assert.False(t, contract.IsPermanent(err))
	assert.ErrorIs(t, err, proto.ErrNoOutcome)
}
