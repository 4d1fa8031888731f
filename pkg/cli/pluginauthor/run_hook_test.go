package pluginauthor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestTimedOutReadsTheClock: a deadline passed is --timeout's even while the context's
// timer has not fired yet (a loaded machine), so that the plugin's own "Timeout", which can
// come back first, is never taken for the hook's answer.
func TestTimedOutReadsTheClock(t *testing.T) {
	deadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	assert.False(t, timedOut(ctx, deadline.Add(-time.Millisecond)))
	assert.True(t, timedOut(ctx, deadline), "the clock passed the deadline; the timer has not fired")
	assert.NoError(t, ctx.Err())
}
