package dashboard

import (
	"context"
	"io"
	"io/fs"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServe serves on a loopback listener as the command does, and stops with ctx.
func TestServe(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	l, err := ListenLoopback(0)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- f.server.Serve(ctx, l) }()

	base := "http://" + l.Addr().String()
	get := func(path string, header map[string]string) *http.Response {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		require.NoError(t, err)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	resp := get("/?token="+testToken, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(body), "<title>Stepwise</title>")
	assert.Equal(t, http.StatusOK, get("/api/pipelines", map[string]string{TokenHeader: testToken}).StatusCode)
	assert.Equal(t, http.StatusUnauthorized, get("/api/pipelines", nil).StatusCode)

	// An open stream does not hold the shutdown up: it ends with ctx.
	stream := get("/api/events", map[string]string{TokenHeader: testToken})
	require.Equal(t, http.StatusOK, stream.StatusCode)

	cancel()
	select {
	case err := <-served:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}

func TestEmbeddedAssets(t *testing.T) {
	assets, err := embeddedAssets()
	require.NoError(t, err)
	files := 0
	require.NoError(t, fs.WalkDir(assets, ".", func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files++
		}
		return err
	}))
	assert.Positive(t, files, "the web files are in the binary")
}
