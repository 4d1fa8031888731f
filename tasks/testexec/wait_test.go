package testexec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

func TestWait(t *testing.T) {
	for _, tt := range []struct {
		name      string
		started   time.Duration // before now
		wantDone  bool
		wantAfter time.Duration // at least
	}{
		{name: "first call: waits the whole duration", started: 0, wantAfter: 1900 * time.Millisecond},
		{name: "half way: waits what is left", started: time.Second, wantAfter: 900 * time.Millisecond},
		{name: "past the duration: done", started: 3 * time.Second, wantDone: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := &executor.Request{Request: contract.Request{Params: map[string]string{"duration": "2s"}, HookStarted: time.Now().Add(-tt.started)}}
			got, err := Wait{}.Create(t.Context(), req)
			require.NoError(t, err)
			assert.Equal(t, tt.wantDone, got.Done)
			if !tt.wantDone {
				assert.GreaterOrEqual(t, got.RequeueAfter, tt.wantAfter)
				assert.LessOrEqual(t, got.RequeueAfter, 2*time.Second)
			}
		})
	}
}
