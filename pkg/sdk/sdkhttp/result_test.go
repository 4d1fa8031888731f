package sdkhttp_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
	"github.com/stepwise-dev/stepwise/pkg/sdk/sdkhttp"
)

// What a server's URL and answer hold that no message may show.
const (
	pathToken  = "T0-B1-xoxb-path-token"
	queryToken = "q-token-0123456789"
	body       = `{"db_password": "s3cret-body"}`
)

// answer is a server answering status with header and body to every call, and the URL,
// credentials in its path and query, that reaches it.
func answer(t *testing.T, status int, header ...string) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(s.Close)
	return s.URL + "/hooks/" + pathToken + "?token=" + queryToken
}

// post calls target and returns its answer, the body not read.
func post(t *testing.T, target string) *http.Response {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Post(target, "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// shown is every text of an outcome a step's status may show.
func shown(res contract.Result, err error) string {
	text := res.Message
	if err != nil {
		text += " " + err.Error()
	}
	return text
}

func TestResult(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		header      []string
		done        string
		outcomes    sdkhttp.Outcomes
		wantDone    bool
		wantRequeue time.Duration // of a result that is not done
		wantReason  string        // of an error; empty: a result
		wantPerm    bool
		wantText    string // the exact message or error text
	}{
		{name: "200 is done", status: 200, done: "instance terminated", wantDone: true, wantText: "instance terminated"},
		{name: "204 without a message", status: 204, wantDone: true, wantText: "answered 204 No Content"},
		{
			name: "202 waits for Retry-After", status: 202, header: []string{"Retry-After", "7"},
			wantRequeue: 7 * time.Second, wantText: "accepted (202 Accepted), in progress: calling again in 7s",
		},
		{name: "202 without Retry-After waits the default", status: 202, wantRequeue: sdkhttp.DefaultPollInterval, wantText: "accepted (202 Accepted), in progress: calling again in 10s"},
		{name: "202 with an unreadable Retry-After waits the default", status: 202, header: []string{"Retry-After", "soon"}, wantRequeue: sdkhttp.DefaultPollInterval, wantText: "accepted (202 Accepted), in progress: calling again in 10s"},
		{name: "202 does not busy-loop", status: 202, header: []string{"Retry-After", "0"}, wantRequeue: sdkhttp.MinRetryAfter, wantText: "accepted (202 Accepted), in progress: calling again in 1s"},
		{
			name: "429 with Retry-After waits that long", status: 429, header: []string{"Retry-After", "30"},
			wantRequeue: 30 * time.Second, wantText: "throttled (429 Too Many Requests): calling again in 30s",
		},
		{name: "429 without Retry-After is retryable", status: 429, wantReason: "HTTPThrottled", wantText: "POST: answered 429 Too Many Requests"},
		{name: "3xx is permanent", status: 307, header: []string{"Location", "http://elsewhere/?token=" + queryToken}, wantReason: "HTTPRedirected", wantPerm: true, wantText: "POST: answered 307 Temporary Redirect; redirects are not followed"},
		{name: "4xx is permanent", status: 404, wantReason: "HTTPRejected", wantPerm: true, wantText: "POST: answered 404 Not Found"},
		{name: "5xx is retryable", status: 503, header: []string{"Retry-After", "30"}, wantReason: "HTTPFailed", wantText: "POST: answered 503 Service Unavailable"},
		{
			name: "a plugin's reasons, the request named without its query", status: 422,
			outcomes:   sdkhttp.Outcomes{ReasonPrefix: "Webhook", Name: func(method, url string) string { return method + " " + egress.RedactURL(url) }},
			wantReason: "WebhookRejected", wantPerm: true, wantText: "POST {server}/hooks/" + pathToken + ": answered 422 Unprocessable Entity",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := answer(t, tt.status, tt.header...)
			res, err := tt.outcomes.Result(post(t, target), tt.done)
			server, _, _ := strings.Cut(target, "/hooks/")
			want := strings.ReplaceAll(tt.wantText, "{server}", server)
			if tt.wantReason != "" {
				var e *contract.Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, tt.wantReason, e.Reason)
				assert.Equal(t, tt.wantPerm, e.Permanent)
				assert.Equal(t, want, err.Error())
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.wantDone, res.Done)
				assert.Equal(t, tt.wantRequeue, res.RequeueAfter)
				assert.Equal(t, want, res.Message)
			}
			text := shown(res, err)
			assert.NotContains(t, text, queryToken)
			assert.NotContains(t, text, "s3cret-body", "the body is not read")
			if tt.outcomes.Name == nil {
				assert.NotContains(t, text, pathToken)
				assert.NotContains(t, text, "127.0.0.1")
			}
		})
	}
}

func TestResultIgnoresTheReasonPhrase(t *testing.T) {
	req := httptest.NewRequest(http.MethodPut, "http://127.0.0.1/x?token="+queryToken, nil)
	resp := &http.Response{StatusCode: 500, Status: "500 db_password=s3cret", Request: req, Header: http.Header{}}
	_, err := sdkhttp.Result(resp, "")
	require.Error(t, err)
	assert.Equal(t, "PUT: answered 500 Internal Server Error", err.Error())
}

func TestResultWithoutARequest(t *testing.T) {
	_, err := sdkhttp.Result(&http.Response{StatusCode: 599, Header: http.Header{}}, "")
	var e *contract.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "HTTPFailed", e.Reason)
	assert.Equal(t, "answered 599", err.Error())
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		header string
		want   time.Duration
		ok     bool
	}{
		{"", 0, false},
		{"7", 7 * time.Second, true},
		{" 7 ", 7 * time.Second, true},
		{"0", sdkhttp.MinRetryAfter, true},
		{"999999999999", sdkhttp.MaxRetryAfter, true},
		{"-1", 0, false},
		{now.Add(2 * time.Minute).Format(http.TimeFormat), 2 * time.Minute, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), sdkhttp.MinRetryAfter, true},
		{now.Add(24 * time.Hour).Format(http.TimeFormat), sdkhttp.MaxRetryAfter, true},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		got, ok := sdkhttp.RetryAfter(tt.header, now)
		assert.Equal(t, tt.ok, ok, tt.header)
		assert.Equal(t, tt.want, got, tt.header)
	}
}
