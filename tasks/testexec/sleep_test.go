package testexec

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

func TestSleep(t *testing.T) {
	tests := []struct {
		name       string
		params     map[string]string
		cancelled  bool
		wantErr    string
		wantResult contract.Result
	}{
		{name: "sleeps, then succeeds", params: map[string]string{"duration": "1ms"}, wantResult: contract.Done("slept 1ms")},
		{name: "sleeps, then fails", params: map[string]string{"duration": "1ms", "fail": FailRetryable}, wantErr: "asked to fail"},
		{name: "a cancelled call returns", params: map[string]string{"duration": "1h"}, cancelled: true, wantErr: "slept less than 1h0m0s: context canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			if tt.cancelled {
				cancel()
			}
			defer cancel()
			got, err := Sleep{}.Create(ctx, &executor.Request{Request: contract.Request{Params: tt.params}})
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantResult, got)
		})
	}
}
