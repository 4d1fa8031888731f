package main

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

// runCreate runs Create of e once for the step of serverID, with secrets.
func runCreate(t *testing.T, e *terminateServer, secrets map[string][]byte) (sdk.Result, error) {
	t.Helper()
	return plugintest.ServeCloud(t, e, paramCredentialsSecret).Create(t, map[string]string{"serverID": serverID, "node": nodeName, "credentialsSecret": "os-creds"}, secrets)
}

func TestLoopbackKeystoneIsRefusedWithoutAllowance(t *testing.T) {
	f := newFakeCloud(t, password)
	f.addServer(serverID, "ACTIVE", 1, 0)
	_, err := runCreate(t, newTestServer(), validSecrets(f.authURL()))
	plugintest.AssertEndpointRefused(t, err, "127.0.0.1 is a loopback address")
	assert.Zero(t, f.count("POST /v3/auth/tokens"), "nothing reached Keystone")
}

// An authURL may carry credentials in its user info or query: no message shows them.
func TestMessagesShowTheAuthURLWithoutCredentials(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	tests := []struct {
		name    string
		setup   func(f *fakeCloud)
		authURL func(f *fakeCloud) string
		secrets func(s map[string][]byte)
		want    plugintest.Outcome
		// wantURL is in the message: it still says where.
		wantURL func(f *fakeCloud) string
	}{
		{
			name:    "Keystone refuses the password",
			authURL: func(f *fakeCloud) string { return plugintest.WithUserInfo(f.authURL()) },
			secrets: func(s map[string][]byte) { s[keyPassword] = []byte("wrong") },
			want:    plugintest.Outcome{Reason: "InvalidCredentials", Permanent: true},
			wantURL: func(f *fakeCloud) string { return f.URL + "/v3" },
		},
		{
			name:    "Nova fails",
			setup:   func(f *fakeCloud) { f.setNovaStatus(http.StatusInternalServerError) },
			authURL: func(f *fakeCloud) string { return plugintest.WithUserInfo(f.authURL()) },
			want:    plugintest.Outcome{Reason: "CloudUnavailable"},
			wantURL: func(f *fakeCloud) string { return f.URL },
		},
		{
			name:    "Keystone unreachable",
			authURL: func(*fakeCloud) string { return plugintest.WithCredentials(closed.URL + "/v3") },
			want:    plugintest.Outcome{Reason: "CloudUnreachable"},
			wantURL: func(*fakeCloud) string { return closed.URL + "/v3" },
		},
		{
			name:    "an authURL that does not parse",
			authURL: func(f *fakeCloud) string { return strings.Replace(f.authURL(), "://", "://admin:Sup3r S3cret@", 1) },
			want:    plugintest.Outcome{Reason: "InvalidCredentials", Permanent: true},
			wantURL: func(f *fakeCloud) string { return f.URL + "/v3" },
		},
		{
			name:    "version discovery fails",
			authURL: func(f *fakeCloud) string { return plugintest.WithCredentials(f.authURL()) },
			want:    plugintest.Outcome{Reason: "Rejected", Permanent: true},
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
			plugintest.AssertOutcome(t, tt.want, sdk.Result{}, err)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantURL(f))
			plugintest.AssertNoSecret(t, err.Error(), append(plugintest.URLSecrets(), password)...)
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
