package sdkhttp_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
	"github.com/stepwise-dev/stepwise/pkg/sdk/sdkhttp"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// withSecrets is u with credentials in its path and query.
func withSecrets(u string) string { return u + "/hooks/" + pathToken + "?token=" + queryToken }

// closedURL is a URL where nothing listens.
func closedURL() string {
	s := httptest.NewServer(http.NotFoundHandler())
	s.Close()
	return s.URL
}

// hanging is a server that answers once the test ends.
func hanging(t *testing.T) string {
	t.Helper()
	release := make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	t.Cleanup(func() { close(release); s.Close() })
	return s.URL
}

func TestError(t *testing.T) {
	tests := []struct {
		name string
		// call returns the error of a call, and the URL it called.
		call       func(t *testing.T) (string, error)
		outcomes   sdkhttp.Outcomes
		wantReason string // empty: the error has no reason of its own
		wantPerm   bool
		wantText   string
		wantIs     error
	}{
		{
			name: "a closed port",
			call: func(t *testing.T) (string, error) {
				target := withSecrets(closedURL())
				_, err := http.Post(target, "text/plain", nil)
				return target, err
			},
			wantReason: "HTTPUnreachable", wantText: "POST: could not connect (refused, unreachable or timed out)",
		},
		{
			name: "a host name that does not resolve",
			call: func(*testing.T) (string, error) {
				target := withSecrets("http://nowhere.invalid")
				return target, &url.Error{Op: "Get", URL: target, Err: &net.OpError{Op: "dial", Net: "tcp",
					Err: &net.DNSError{Err: "no such host", Name: "nowhere.invalid", IsNotFound: true}}}
			},
			wantReason: "HTTPUnreachable", wantText: "GET: the host name does not resolve",
		},
		{
			name: "an untrusted certificate",
			call: func(t *testing.T) (string, error) {
				s := httptest.NewUnstartedServer(http.NotFoundHandler())
				s.Config.ErrorLog = log.New(io.Discard, "", 0) // its side of the refused handshake
				s.StartTLS()
				t.Cleanup(s.Close)
				target := withSecrets(s.URL)
				_, err := http.Post(target, "text/plain", nil)
				return target, err
			},
			wantReason: "HTTPUnreachable", wantText: "POST: the server's TLS certificate is not trusted: x509: certificate signed by unknown authority",
		},
		{
			name: "https to a plain port",
			call: func(t *testing.T) (string, error) {
				s := httptest.NewServer(http.NotFoundHandler())
				t.Cleanup(s.Close)
				target := withSecrets(strings.Replace(s.URL, "http://", "https://", 1))
				_, err := http.Post(target, "text/plain", nil)
				return target, err
			},
			wantReason: "HTTPUnreachable", wantText: "POST: the server does not speak TLS (use an http URL, or https on a TLS port)",
		},
		{
			name: "no answer in time",
			call: func(t *testing.T) (string, error) {
				target := withSecrets(hanging(t))
				_, err := (&http.Client{Timeout: 20 * time.Millisecond}).Post(target, "text/plain", nil)
				return target, err
			},
			wantReason: "HTTPUnreachable", wantText: "POST: the server did not answer in time",
		},
		{
			name: "a cancelled context",
			call: func(t *testing.T) (string, error) {
				target := withSecrets(hanging(t))
				ctx, cancel := context.WithCancel(t.Context())
				req, err := http.NewRequestWithContext(ctx, http.MethodDelete, target, nil)
				require.NoError(t, err)
				time.AfterFunc(20*time.Millisecond, cancel)
				_, err = http.DefaultClient.Do(req)
				return target, err
			},
			wantText: "DELETE: cancelled before an answer", wantIs: context.Canceled,
		},
		{
			name: "an address the egress policy refuses",
			call: func(t *testing.T) (string, error) {
				target := withSecrets(closedURL())
				_, err := (&http.Client{Transport: egress.New().Transport(nil)}).Post(target, "text/plain", nil)
				return target, err
			},
			wantReason: egress.ReasonEndpointNotAllowed, wantPerm: true,
			wantText: "POST: 127.0.0.1 is a loopback address: plugins may not connect to it unless an operator admin allows its range with the operator's flag --plugin-allowed-cidrs (kubectl stepwise plugin run: --allowed-cidrs)",
		},
		{
			name: "an error with its own reason",
			call: func(t *testing.T) (string, error) {
				target := withSecrets(closedURL())
				client := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
					return nil, contract.Retryable("RateLimited", errors.New("client-side rate limit"))
				})}
				_, err := client.Post(target, "text/plain", nil)
				return target, err
			},
			wantReason: "RateLimited", wantText: "POST: client-side rate limit",
		},
		{
			name: "a plugin's reasons, the request named without its query",
			call: func(t *testing.T) (string, error) {
				target := withSecrets(closedURL())
				_, err := http.Post(target, "text/plain", nil)
				return target, err
			},
			outcomes:   sdkhttp.Outcomes{ReasonPrefix: "Webhook", Name: func(method, url string) string { return method + " " + egress.RedactURL(url) }},
			wantReason: "WebhookUnreachable", wantText: "POST {server}/hooks/" + pathToken + ": could not connect (refused, unreachable or timed out)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target, cause := tt.call(t)
			require.Error(t, cause)
			err := tt.outcomes.Error(cause)
			server, _, _ := strings.Cut(target, "/hooks/")
			assert.Equal(t, strings.ReplaceAll(tt.wantText, "{server}", server), err.Error())
			assert.Equal(t, tt.wantReason, contract.OwnReason(err))
			assert.Equal(t, tt.wantPerm, contract.IsPermanent(err))
			if tt.wantIs != nil {
				assert.ErrorIs(t, err, tt.wantIs)
			}
			assert.NotContains(t, err.Error(), queryToken)
			if tt.outcomes.Name == nil {
				assert.NotContains(t, err.Error(), pathToken)
				assert.NotContains(t, err.Error(), server)
			}
		})
	}
}

func TestErrorKeepsWhatItWraps(t *testing.T) {
	dns := &net.DNSError{Err: "no such host", Name: "nowhere.invalid", IsNotFound: true}
	err := sdkhttp.Error(&url.Error{Op: "Get", URL: "http://nowhere.invalid/", Err: dns})
	var got *net.DNSError
	require.ErrorAs(t, err, &got)
	assert.Same(t, dns, got)
	assert.NoError(t, sdkhttp.Error(nil))
}
