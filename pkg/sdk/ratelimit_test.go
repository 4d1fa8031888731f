package sdk_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

func TestRateLimitedTransport(t *testing.T) {
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) }))
	defer srv.Close()
	// A burst of 2 and a refill far slower than the test: the third request must wait for
	// a token, and gives up when its context ends.
	client := &http.Client{Transport: sdk.RateLimitedTransport(nil, sdk.NewLimiter(0.001, 2))}

	for range 2 {
		resp, err := client.Get(srv.URL)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	_, err = client.Do(req) //nolint:bodyclose // no response on error
	require.Error(t, err)
	var e *sdk.Error
	require.True(t, errors.As(err, &e), "want an *sdk.Error, got %T", err)
	assert.Equal(t, "RateLimited", e.Reason)
	assert.False(t, e.Permanent)
	assert.Equal(t, int32(2), served.Load(), "the limited request never reached the server")
}
