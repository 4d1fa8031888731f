package main

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
	"github.com/stepwise-dev/stepwise/pkg/sdk/sdkhttp"
)

// server answers 503 for the first failures GETs, then 200; it counts the GETs.
func server(t *testing.T, failures int32) (*httptest.Server, *atomic.Int32) {
	var gets atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if gets.Add(1) <= failures {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(s.Close)
	return s, &gets
}

// newReady is the executor with a client allowed to reach the test's loopback servers,
// as the operator's --plugin-allowed-cidrs would allow a private network.
func newReady(t *testing.T) ready {
	t.Setenv(egress.EnvAllowedCIDRs, "127.0.0.0/8")
	return ready{client: sdkhttp.Client()}
}

func TestReadyWaitsForA2xx(t *testing.T) {
	srv, gets := server(t, 2)
	c := plugintest.Serve(t, newReady(t))
	got := plugintest.Drive(t, c, "http.ready", sdk.HookCreate,
		plugintest.Request(sdk.HookCreate, "uid", map[string]string{"url": srv.URL + "/healthz"}))
	require.NoError(t, got.Err)
	assert.True(t, got.Result.Done)
	assert.Equal(t, "ready", got.Result.Message)
	assert.Equal(t, 3, got.Polls)
	assert.Equal(t, 20*time.Second, got.Waited, "the default interval, twice")
	assert.Equal(t, int32(3), gets.Load())
}

// TestReadyTimesOutAcrossWaits: the timeout counts from the hook's first call, across its
// waits (req.HookStarted): no start time needs to be kept in an output.
func TestReadyTimesOutAcrossWaits(t *testing.T) {
	srv, _ := server(t, 1000)
	c := plugintest.Serve(t, newReady(t))
	var messages []string
	got := plugintest.Drive(t, c, "http.ready", sdk.HookCreate,
		plugintest.Request(sdk.HookCreate, "uid", map[string]string{"url": srv.URL, "timeout": "30s", "interval": "10s"}),
		plugintest.OnCall(func(_ int, res sdk.Result, _ error) { messages = append(messages, res.Message) }))
	require.Error(t, got.Err)
	assert.True(t, sdk.IsPermanent(got.Err))
	assert.Equal(t, "NotReady", sdk.OwnReason(got.Err))
	assert.Equal(t, "no 2xx answer within 30s", got.Err.Error())
	assert.Equal(t, 5, got.Polls, "at 0, 10, 20 and 30s it asks; at 40s it gives up")
	assert.Equal(t, "not ready after 0s: 503 Service Unavailable", messages[0])
	assert.Empty(t, got.Result.State, "nothing kept: the start is the hook's")
}

func TestReadyParametersAreChecked(t *testing.T) {
	c := plugintest.Serve(t, newReady(t))
	for params, want := range map[string]map[string]string{
		`parameter "url" is required`:                                      {},
		`parameter "url" is not an absolute http or https URL`:             {"url": "ftp://example.com"},
		`parameter "timeout" is "soon", not a duration such as 90s or 10m`: {"url": "https://example.com", "timeout": "soon"},
	} {
		_, err := c.Run(t.Context(), "http.ready", sdk.HookCreate, plugintest.Request(sdk.HookCreate, "uid", want))
		require.Error(t, err)
		assert.Equal(t, params, err.Error())
	}
}

func TestReadyConformance(t *testing.T) {
	srv, _ := server(t, 0)
	plugintest.Conformance(t, newReady(t), map[string]string{"url": srv.URL}, plugintest.WithWaits(10))
}
