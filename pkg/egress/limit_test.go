package egress

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gzipBomb is n zero bytes, gzip-compressed: a few KiB on the wire.
func gzipBomb(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	require.NoError(t, err)
	zeros := make([]byte, 1<<20)
	for written := 0; written < n; written += len(zeros) {
		_, err := w.Write(zeros)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// TestResponsesAreBounded: a tenant's endpoint cannot make a plugin read more than the
// bound, plain or compressed (Go's transport inflates gzip it asked for transparently, so
// a 16 MiB bomb of a few KiB on the wire would be read whole).
func TestResponsesAreBounded(t *testing.T) {
	const limit = 1 << 20
	bomb := gzipBomb(t, 16<<20)
	plain := bytes.Repeat([]byte("x"), 3<<20)
	small := []byte(`{"ok":true}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/bomb":
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(bomb)
		case "/plain":
			_, _ = w.Write(plain)
		default:
			_, _ = w.Write(small)
		}
	}))
	defer srv.Close()
	policy := New(netip.MustParsePrefix("127.0.0.0/8"))
	client := &http.Client{Transport: LimitResponses(policy.Transport(nil), limit)}

	tests := []struct {
		path    string
		wantErr bool
		want    []byte
	}{
		{path: "/bomb", wantErr: true},
		{path: "/plain", wantErr: true},
		{path: "/small", want: small},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp, err := client.Get(srv.URL + tt.path)
			require.NoError(t, err)
			defer func() { _ = resp.Body.Close() }()
			got, err := io.ReadAll(resp.Body)
			if !tt.wantErr {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				return
			}
			var tooLarge *ResponseTooLargeError
			require.True(t, errors.As(err, &tooLarge), "want a ResponseTooLargeError, got %v", err)
			assert.Equal(t, int64(limit), tooLarge.Limit)
			assert.LessOrEqual(t, len(got), limit, "no more than the bound is read")
			assert.Contains(t, err.Error(), "more than 1048576 bytes")
		})
	}
}
