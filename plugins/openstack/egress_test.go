package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

func runCreate(t *testing.T, e *terminateServer, secrets map[string][]byte) (sdk.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := withSecret(plugintest.Request(sdk.HookCreate, "uid-1", map[string]string{"serverID": serverID, "node": nodeName, "credentialsSecret": "os-creds"}), secrets)
	return plugintest.Serve(t, e).Run(ctx, executorName, sdk.HookCreate, req)
}

func TestLoopbackKeystoneIsRefusedWithoutAllowance(t *testing.T) {
	f := newFakeCloud(t, password)
	f.addServer(serverID, "ACTIVE", 1, 0)
	res, err := runCreate(t, newTestServer(), validSecrets(f.authURL()))
	var e *sdk.Error
	require.ErrorAs(t, err, &e, "result: %+v", res)
	assert.Equal(t, "EndpointNotAllowed", e.Reason)
	assert.True(t, e.Permanent)
	assert.Contains(t, err.Error(), "127.0.0.1 is a loopback address")
	assert.Contains(t, err.Error(), "--plugin-allowed-cidrs")
	assert.Zero(t, f.count("POST /v3/auth/tokens"), "nothing reached Keystone")
}

// An authURL may carry credentials in its user info or query: no message shows them.
func TestMessagesShowTheAuthURLWithoutCredentials(t *testing.T) {
	withUserinfo := func(u string) string { return strings.Replace(u, "://", "://admin:Sup3rS3cret@", 1) }
	withQuery := func(u string) string { return withUserinfo(u) + "?token=abc123" }
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	tests := []struct {
		name    string
		setup   func(f *fakeCloud)
		authURL func(f *fakeCloud) string
		secrets func(s map[string][]byte)
		reason  string
		// wantURL is in the message: it still says where.
		wantURL func(f *fakeCloud) string
	}{
		{
			name:    "Keystone refuses the password",
			authURL: func(f *fakeCloud) string { return withUserinfo(f.authURL()) },
			secrets: func(s map[string][]byte) { s[keyPassword] = []byte("wrong") },
			reason:  "InvalidCredentials",
			wantURL: func(f *fakeCloud) string { return f.URL + "/v3" },
		},
		{
			name:    "Nova fails",
			setup:   func(f *fakeCloud) { f.setNovaStatus(http.StatusInternalServerError) },
			authURL: func(f *fakeCloud) string { return withUserinfo(f.authURL()) },
			reason:  "CloudUnavailable",
			wantURL: func(f *fakeCloud) string { return f.URL },
		},
		{
			name:    "Keystone unreachable",
			authURL: func(*fakeCloud) string { return withQuery(closed.URL + "/v3") },
			reason:  "CloudUnreachable",
			wantURL: func(*fakeCloud) string { return closed.URL + "/v3" },
		},
		{
			name:    "an authURL that does not parse",
			authURL: func(f *fakeCloud) string { return strings.Replace(f.authURL(), "://", "://admin:Sup3r S3cret@", 1) },
			reason:  "InvalidCredentials",
			wantURL: func(f *fakeCloud) string { return f.URL + "/v3" },
		},
		{
			name:    "version discovery fails",
			authURL: func(f *fakeCloud) string { return withQuery(f.authURL()) },
			reason:  "Rejected",
			wantURL: func(f *fakeCloud) string { return f.URL + "/v3" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCloud(t, password)
			f.addServer(serverID, "ACTIVE", 1, 0)
			if tt.setup != nil {
				tt.setup(f)
			}
			secrets := validSecrets(tt.authURL(f))
			if tt.secrets != nil {
				tt.secrets(secrets)
			}
			_, err := runCreate(t, newTestServer(loopback), secrets)
			var e *sdk.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tt.reason, e.Reason, "%v", err)
			assert.Contains(t, err.Error(), tt.wantURL(f))
			for _, secret := range []string{"admin:", "S3cret", "abc123", password} {
				assert.NotContains(t, err.Error(), secret)
			}
		})
	}
}

// TestKeystoneGzipBombFailsOnlyItsStep: an authURL's endpoint answering a few KiB of gzip
// that inflate to 64 MiB fails the step with a clear error after reading the bound, rather
// than inflate it all in the plugin every tenant shares.
func TestKeystoneGzipBombFailsOnlyItsStep(t *testing.T) {
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	require.NoError(t, err)
	_, _ = w.Write([]byte(`{"token":{"catalog":[`))
	padding := bytes.Repeat([]byte(" "), 1<<20)
	for range 64 {
		_, _ = w.Write(padding)
	}
	require.NoError(t, w.Close())
	bomb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("X-Subject-Token", "tok")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(buf.Bytes())
	}))
	defer bomb.Close()

	_, err = runCreate(t, newTestServer(loopback), validSecrets(bomb.URL+"/v3"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "more than 8388608 bytes")
}
