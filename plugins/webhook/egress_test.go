package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

const dbPassword = "s3cret"

// run calls the executor once (Create) with the url and the test key, as the engine would.
func run(t *testing.T, c *call, target string) (sdk.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := plugintest.Request(sdk.HookCreate, "uid-1", map[string]string{"url": target, "credentialsSecret": "hook-creds"})
	req.Secrets = map[string][]byte{keyHMAC: []byte(hmacKey)}
	return plugintest.Serve(t, c).Run(ctx, executorName, sdk.HookCreate, req)
}

// secretService is an internal service a tenant must not read: it answers whatever it is
// asked with a password, in the given status, without any header of the webhook protocol.
func secretService(t *testing.T, status int, body string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	calls := &atomic.Int32{}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	})) // listens on 127.0.0.1
	t.Cleanup(s.Close)
	return s, calls
}

// everything is what a tenant reads back of a call: the error or the result's message and
// outputs.
func everything(res sdk.Result, err error) string {
	var b strings.Builder
	if err != nil {
		b.WriteString(err.Error())
	}
	b.WriteString(res.Message)
	for k, v := range res.Outputs {
		b.WriteString(k + "=" + v)
	}
	return b.String()
}

func TestLoopbackReceiverIsRefusedWithoutAllowance(t *testing.T) {
	tests := []struct {
		name string
		url  func(s *httptest.Server) string
	}{
		{name: "by address", url: func(s *httptest.Server) string { return s.URL + "/hook" }},
		{name: "by name, refused after DNS", url: func(s *httptest.Server) string {
			return "http://localhost:" + strconv.Itoa(s.Listener.Addr().(*net.TCPAddr).Port) + "/hook"
		}},
		{name: "IPv4-mapped IPv6", url: func(s *httptest.Server) string {
			return "http://[::ffff:127.0.0.1]:" + strconv.Itoa(s.Listener.Addr().(*net.TCPAddr).Port) + "/hook"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, calls := secretService(t, http.StatusOK, `{"db_password":"s3cret"}`)
			res, err := run(t, newTestCall(), tt.url(s))
			var e *sdk.Error
			require.ErrorAs(t, err, &e, "result: %+v", res)
			assert.Equal(t, "EndpointNotAllowed", e.Reason)
			assert.True(t, e.Permanent)
			assert.Contains(t, err.Error(), "127.0.0.1 is a loopback address")
			assert.Contains(t, err.Error(), "--plugin-allowed-cidrs")
			assert.Zero(t, calls.Load(), "nothing reached the service")
		})
	}
}

// A closed and an open port of a refused address answer alike: the plugin is no port
// scanner.
func TestRefusedAddressesAreNoPortScanner(t *testing.T) {
	open, _ := secretService(t, http.StatusOK, `{}`)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	c := newTestCall()
	_, openErr := run(t, c, open.URL)
	_, closedErr := run(t, c, closed.URL)
	require.Error(t, openErr)
	require.Error(t, closedErr)
	hidePort := func(err error, u string) string { return strings.ReplaceAll(err.Error(), u, "URL") }
	assert.Equal(t, hidePort(openErr, open.URL), hidePort(closedErr, closed.URL))
	assert.NotContains(t, closedErr.Error(), "connection refused")
}

func TestAnswersAreNotReflected(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		// wantReason is the error's reason; empty for a result.
		wantReason string
		// wantMessage is in the message or error.
		wantMessage string
	}{
		{name: "500", status: 500, body: `{"db_password":"s3cret"}`, wantReason: "WebhookFailed", wantMessage: "500 Internal Server Error"},
		{name: "403", status: 403, body: `{"db_password":"s3cret"}`, wantReason: "WebhookRejected", wantMessage: "403 Forbidden"},
		{name: "429", status: 429, body: `{"db_password":"s3cret"}`, wantReason: "WebhookThrottled", wantMessage: "429"},
		{name: "200 without the opt-in header", status: 200, body: `{"db_password":"s3cret"}`, wantMessage: "webhook answered 200"},
		{
			name: "200 without the opt-in header, in the shape of an answer", status: 200,
			body:        `{"message": "db_password=s3cret", "outputs": {"db_password": "s3cret"}}`,
			wantMessage: "webhook answered 200",
		},
		{
			name: "202 without the opt-in header, in the shape of an answer", status: 202,
			body:        `{"message": "db_password=s3cret", "outputs": {"db_password": "s3cret"}}`,
			wantMessage: "in progress",
		},
		{
			name: "200 without the opt-in header, a malformed answer", status: 200,
			body:        `{"outputs": "s3cret"}`,
			wantMessage: "webhook answered 200",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := secretService(t, tt.status, tt.body)
			res, err := run(t, newTestCall(loopback), s.URL)
			if tt.wantReason != "" {
				var e *sdk.Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, tt.wantReason, e.Reason)
			} else {
				require.NoError(t, err)
				assert.Empty(t, res.Outputs)
			}
			assert.Contains(t, everything(res, err), tt.wantMessage)
			assert.NotContains(t, everything(res, err), dbPassword)
		})
	}
}

func TestOptedInAnswerIsTaken(t *testing.T) {
	rc := newReceiver(t, false, hmacKey, answerJSON(200,
		`{"outputs": {"instanceID": "vm-42"}, "message": "vm-42 terminated", "db_password": "s3cret"}`, headerResult, resultV1))
	res, err := run(t, newTestCall(loopback), rc.URL)
	require.NoError(t, err)
	assert.True(t, res.Done)
	assert.Equal(t, "vm-42 terminated", res.Message)
	assert.Equal(t, map[string]string{"instanceID": "vm-42"}, res.Outputs)
	assert.NotContains(t, everything(res, err), dbPassword, "only message and outputs are taken")
}

func TestRedirectToLoopbackIsNotFollowed(t *testing.T) {
	// The secret service listens on 127.0.0.2, which the policy (127.0.0.1/32) refuses; the
	// receiver, on 127.0.0.1, redirects there with credentials in the Location.
	l, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err, "on Linux the whole of 127.0.0.0/8 is the loopback network")
	secret, calls := secretService(t, http.StatusOK, `{"db_password":"s3cret"}`)
	secret.Close()
	secret = httptest.NewUnstartedServer(secret.Config.Handler)
	secret.Listener = l
	secret.Start()
	t.Cleanup(secret.Close)
	location := "http://root:" + dbPassword + "@" + l.Addr().String() + "/internal?token=" + dbPassword
	rc := newReceiver(t, false, hmacKey, func(w http.ResponseWriter, _ int) {
		w.Header().Set("Location", location)
		w.WriteHeader(http.StatusTemporaryRedirect)
	})

	res, err := run(t, newTestCall(netip.MustParsePrefix("127.0.0.1/32")), rc.URL)
	var e *sdk.Error
	require.ErrorAs(t, err, &e, "result: %+v", res)
	assert.Equal(t, "WebhookRedirected", e.Reason)
	assert.True(t, e.Permanent)
	assert.Contains(t, err.Error(), "http://"+l.Addr().String()+"/internal")
	assert.NotContains(t, err.Error(), dbPassword, "the Location is shown without user info and query")
	assert.Zero(t, calls.Load(), "the redirect is not followed")
}

func TestInvalidUTF8AnswerGivesAValidError(t *testing.T) {
	tests := []struct {
		name   string
		answer string // the raw HTTP answer
	}{
		{name: "in the body", answer: "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: 7\r\nConnection: close\r\n\r\n\xff\xfeoops\xc3"},
		{name: "in the reason phrase", answer: "HTTP/1.1 500 \xff\xfe db_password=s3cret\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Called directly: the gRPC path would hide an invalid string in an error.
			req := plugintest.Request(sdk.HookCreate, "uid-1", map[string]string{"url": rawServer(t, tt.answer)})
			req.Secrets = map[string][]byte{keyHMAC: []byte(hmacKey)}
			_, err := newTestCall(loopback).Create(t.Context(), req)
			var e *sdk.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, "WebhookFailed", e.Reason)
			assert.True(t, utf8.ValidString(err.Error()), "%q", err.Error())
			assert.Contains(t, err.Error(), "500 Internal Server Error")
			assert.NotContains(t, err.Error(), dbPassword)
		})
	}
}

// rawServer answers every connection on 127.0.0.1 with answer, after reading the request's
// head, and returns its URL.
func rawServer(t *testing.T, answer string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = conn.Close() }()
				r := bufio.NewReader(conn)
				if _, err := http.ReadRequest(r); err != nil {
					return
				}
				_, _ = io.WriteString(conn, answer)
			}()
		}
	}()
	return "http://" + l.Addr().String() + "/hook"
}
