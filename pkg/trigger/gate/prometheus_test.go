package gate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/egress"
)

// Answers of the Prometheus HTTP API (/api/v1/query), as Prometheus writes them.
const (
	emptyVector = `{"status":"success","data":{"resultType":"vector","result":[]}}`
	firing      = `{"status":"success","data":{"resultType":"vector","result":[` +
		`{"metric":{"__name__":"ALERTS","alertname":"NodeDown","alertstate":"firing","instance":"node-3:9100","severity":"critical"},"value":[1795939200.123,"1"]},` +
		`{"metric":{"__name__":"ALERTS","alertname":"NodeDown","alertstate":"firing","instance":"node-7:9100","severity":"critical"},"value":[1795939200.123,"1"]}]}}`
	firingWithWarnings = `{"status":"success","warnings":["PromQL info: metric might not be a counter"],"data":{"resultType":"vector","result":[` +
		`{"metric":{"__name__":"ALERTS","alertname":"NodeDown","alertstate":"firing"},"value":[1795939200,"1"]}]}}`
	matrix = `{"status":"success","data":{"resultType":"matrix","result":[` +
		`{"metric":{"__name__":"up","instance":"node-3:9100","job":"node"},"values":[[1795939140,"0"],[1795939170,"0"],[1795939200,"0"]]}]}}`
	emptyMatrix = `{"status":"success","data":{"resultType":"matrix","result":[]}}`
	scalar      = `{"status":"success","data":{"resultType":"scalar","result":[1795939200,"0.97"]}}`
	str         = `{"status":"success","data":{"resultType":"string","result":[1795939200,"ok"]}}`
	badData     = `{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:8: parse error: unexpected \"}\" in label matching, expected string"}`
	execError   = `{"status":"error","errorType":"execution","error":"query processing would load too many samples into memory in query execution"}`
	badGateway  = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)

// prometheus serves /api/v1/query under prefix with code and body, and records the
// query and time it was asked.
func prometheus(t *testing.T, prefix string, code int, body string) (*httptest.Server, *http.Request) {
	t.Helper()
	asked := &http.Request{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != prefix+"/api/v1/query" {
			http.NotFound(w, r)
			return
		}
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		*asked = *r.Clone(context.Background())
		if strings.HasPrefix(body, "{") {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, asked
}

func TestQuery(t *testing.T) {
	at := time.Date(2026, 11, 26, 8, 0, 0, 500_000_000, time.UTC)
	tests := []struct {
		name        string
		code        int
		body        string
		want        QueryResult
		wantErr     []string
		wantFailure Failure
	}{
		{name: "nothing fires: holds", code: http.StatusOK, body: emptyVector, want: QueryResult{}},
		{name: "two alerts fire", code: http.StatusOK, body: firing, want: QueryResult{Series: 2,
			First: `ALERTS{alertname="NodeDown", alertstate="firing", instance="node-3:9100", severity="critical"}`}},
		{name: "warnings are ignored", code: http.StatusOK, body: firingWithWarnings, want: QueryResult{Series: 1,
			First: `ALERTS{alertname="NodeDown", alertstate="firing"}`}},
		{name: "a matrix", code: http.StatusOK, body: matrix, want: QueryResult{Series: 1, First: `up{instance="node-3:9100", job="node"}`}},
		{name: "an empty matrix", code: http.StatusOK, body: emptyMatrix, want: QueryResult{}},
		{name: "a scalar", code: http.StatusOK, body: scalar, want: QueryResult{Series: 1, First: "scalar: 0.97 @[1795939200]"}},

		{name: "a query that does not parse", code: http.StatusBadRequest, body: badData, wantFailure: FailureBadQuery,
			wantErr: []string{"query Prometheus at http://127.0.0.1:", ": the Prometheus refused the query as malformed"}},
		{name: "a query that fails", code: http.StatusUnprocessableEntity, body: execError, wantFailure: FailureQueryFailed,
			wantErr: []string{": the query failed in the Prometheus"}},
		{name: "a query that times out: Prometheus answers 503", code: http.StatusServiceUnavailable, wantFailure: FailureStatus,
			body:    `{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}`,
			wantErr: []string{": the Prometheus answered 503"}},
		{name: "a 503 that is not the API's", code: http.StatusServiceUnavailable, body: "no healthy upstream", wantFailure: FailureStatus,
			wantErr: []string{": the Prometheus answered 503"}},
		{name: "a proxy's 502", code: http.StatusBadGateway, body: badGateway, wantFailure: FailureStatus,
			wantErr: []string{": the Prometheus answered 502"}},
		{name: "a 404", code: http.StatusNotFound, body: "404 page not found", wantFailure: FailureStatus,
			wantErr: []string{": the Prometheus answered 404"}},
		{name: "not JSON with 200", code: http.StatusOK, body: "OK", wantFailure: FailureNotPrometheus,
			wantErr: []string{": the answer is not a Prometheus query result"}},
		{name: "a string: the API client does not decode it", code: http.StatusOK, body: str, wantFailure: FailureNotPrometheus,
			wantErr: []string{"query Prometheus at http://127.0.0.1:", ": the answer is not a Prometheus query result"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, asked := prometheus(t, "", tt.code, tt.body)
			got, err := Query(context.Background(), srv.Client(), srv.URL, `ALERTS{alertstate="firing"}`, at)
			assert.Equal(t, `ALERTS{alertstate="firing"}`, asked.Form.Get("query"))
			assert.Equal(t, "1795680000.5", asked.Form.Get("time"))
			if tt.wantErr != nil {
				require.Error(t, err)
				for _, want := range tt.wantErr {
					assert.Contains(t, err.Error(), want)
				}
				var qerr *QueryError
				require.ErrorAs(t, err, &qerr)
				assert.Equal(t, tt.wantFailure, qerr.Failure)
				assert.Equal(t, QueryResult{}, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestQueryFirstTrimmed cuts the name of a series with long labels to 256 bytes.
func TestQueryFirstTrimmed(t *testing.T) {
	long := strings.Repeat("é", 300)
	body := fmt.Sprintf(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"ALERTS","summary":%q},"value":[1795939200,"1"]}]}}`, long)
	srv, _ := prometheus(t, "", http.StatusOK, body)
	got, err := Query(context.Background(), srv.Client(), srv.URL, "ALERTS", time.Time{})
	require.NoError(t, err)
	assert.Equal(t, 1, got.Series)
	assert.LessOrEqual(t, len(got.First), 256)
	assert.True(t, strings.HasPrefix(got.First, `ALERTS{summary="éé`), got.First)
	assert.True(t, strings.HasSuffix(got.First, "..."), got.First)
}

// TestQueryUnderPath asks the API under baseURL's path (Prometheus behind a proxy, or
// --web.route-prefix), and asks at the server's now when at is zero.
func TestQueryUnderPath(t *testing.T) {
	srv, asked := prometheus(t, "/prometheus", http.StatusOK, emptyVector)
	got, err := Query(context.Background(), srv.Client(), srv.URL+"/prometheus/", "up == 0", time.Time{})
	require.NoError(t, err)
	assert.Equal(t, QueryResult{}, got)
	assert.Equal(t, "up == 0", asked.Form.Get("query"))
	assert.False(t, asked.Form.Has("time"))
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestQueryCallersClient goes through the caller's client: its transport (the egress
// policy, credentials) sees every request, and its refusal is the query's error.
func TestQueryCallersClient(t *testing.T) {
	srv, _ := prometheus(t, "", http.StatusOK, emptyVector)

	var seen []string
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seen = append(seen, r.URL.Host)
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer from-the-caller")
		return http.DefaultTransport.RoundTrip(r)
	})}
	_, err := Query(context.Background(), client, srv.URL, "up", time.Time{})
	require.NoError(t, err)
	assert.Equal(t, []string{strings.TrimPrefix(srv.URL, "http://")}, seen)

	refused := &egress.RefusedError{Addr: netip.MustParseAddr("127.0.0.1"), Range: "a loopback address"}
	denied := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: refused}
	})}
	_, err = Query(context.Background(), denied, srv.URL, "up", time.Time{})
	assert.EqualError(t, err, "query Prometheus at "+srv.URL+": refused: the address is not allowed")
	assert.ErrorIs(t, err, refused, "the refusal is the cause, for a log at a debug verbosity")

	_, err = Query(context.Background(), nil, srv.URL, "up", time.Time{})
	assert.EqualError(t, err, "query Prometheus at "+srv.URL+": could not connect")
}

// TestQueryDeadline gives up on a server that never answers when ctx ends.
func TestQueryDeadline(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for the handler

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Query(ctx, srv.Client(), srv.URL, "up", time.Time{})
	elapsed := time.Since(start)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "query Prometheus at "+srv.URL+": ")
	assert.Less(t, elapsed, time.Second)
}

// TestQueryLargeResponse fails a body over MaxResponseBytes instead of reading it all.
func TestQueryLargeResponse(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[`))
		sample := []byte(`{"metric":{"__name__":"up","instance":"node-0000000:9100","job":"node"},"value":[1795939200,"1"]},`)
		for written := 0; written <= MaxResponseBytes; written += len(sample) {
			if _, err := w.Write(sample); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	_, err := Query(context.Background(), srv.Client(), srv.URL, "up", time.Time{})
	require.Error(t, err)
	assert.EqualError(t, err, "query Prometheus at "+srv.URL+": the answer is larger than the operator reads")
	assert.ErrorIs(t, err, errResponseTooLarge)
}

// TestQueryBaseURL refuses a base URL that is not http(s) with a host, or holds a user
// or password, and names no part of it that may be secret.
func TestQueryBaseURL(t *testing.T) {
	const secret = "s3cr3t-Pa55"
	tests := []struct {
		name    string
		baseURL string
	}{
		{name: "a password", baseURL: "https://admin:" + secret + "@prometheus.monitoring:9090"},
		{name: "a user", baseURL: "http://" + secret + "@prometheus.monitoring:9090"},
		{name: "a password that does not parse", baseURL: "http://admin:" + secret + "%zz@prometheus:9090"},
		{name: "another scheme", baseURL: "ftp://prometheus.monitoring/"},
		{name: "no scheme, a password", baseURL: "admin:" + secret + "@prometheus.monitoring:9090"},
		{name: "no scheme", baseURL: "prometheus.monitoring:9090"},
		{name: "no host", baseURL: "http:///api"},
		{name: "empty", baseURL: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Query(context.Background(), http.DefaultClient, tt.baseURL, "up", time.Time{})
			assert.EqualError(t, err, "the Prometheus URL must be http or https with a host, and hold no user or password")
			var qerr *QueryError
			require.ErrorAs(t, err, &qerr)
			assert.Equal(t, FailureURL, qerr.Failure)
			assert.NotContains(t, errors.Unwrap(err).Error(), secret, "nor does the cause")
		})
	}
}

// TestQueryErrorsHideURL names the endpoint by scheme, host and path: a token in the base
// URL's query string reaches no error.
func TestQueryErrorsHideURL(t *testing.T) {
	const secret = "t0ken-s3cr3t"
	srv, asked := prometheus(t, "/prom", http.StatusBadGateway, badGateway)
	_, err := Query(context.Background(), srv.Client(), srv.URL+"/prom?access_token="+secret, "up", time.Time{})
	require.Error(t, err)
	assert.Equal(t, "query Prometheus at "+srv.URL+"/prom: the Prometheus answered 502", err.Error())
	assert.NotContains(t, err.Error(), secret)
	assert.Equal(t, secret, asked.Form.Get("access_token"), "the base URL's query is still sent")

	refused := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return nil, errors.New("connection refused")
	})}
	_, err = Query(context.Background(), refused, srv.URL+"/prom?access_token="+secret, "up", time.Time{})
	require.Error(t, err)
	assert.Equal(t, "query Prometheus at "+srv.URL+"/prom: could not connect", err.Error())
}

// TestQueryQuotesNoAnswerNorOSError: what Query's error says is one of a closed set of
// fixed texts. Neither the bytes of an answer (a proxy's page, an internal service's
// banner, an API error's text) nor the OS's error text (which tells a closed port from a
// filtered one) reach it: the gate must not be a port scanner that reads back.
func TestQueryQuotesNoAnswerNorOSError(t *testing.T) {
	const secret = "internal-banner-7f3a"
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	tests := []struct {
		name    string
		code    int
		body    string
		baseURL string // default: the server's
		want    string
		notWant []string
	}{
		{name: "a proxy's 502", code: http.StatusBadGateway, body: "<html><h1>502 Bad Gateway</h1>" + secret + "</html>",
			want: "the Prometheus answered 502", notWant: []string{secret, "Bad Gateway", "<html>"}},
		{name: "a service that is not Prometheus", code: http.StatusOK, body: "SSH-2.0-OpenSSH_9.6 " + secret,
			want: "the answer is not a Prometheus query result", notWant: []string{secret, "SSH", "invalid character"}},
		{name: "a 401 with a page", code: http.StatusUnauthorized, body: secret,
			want: "the Prometheus answered 401", notWant: []string{secret}},
		{name: "an API error's text", code: http.StatusUnprocessableEntity,
			body: `{"status":"error","errorType":"execution","error":"` + secret + `"}`,
			want: "the query failed in the Prometheus", notWant: []string{secret}},
		{name: "an API error of a type Prometheus has not", code: http.StatusBadRequest,
			body: `{"status":"error","errorType":"` + secret + `","error":"x"}`,
			want: "the query failed in the Prometheus", notWant: []string{secret}},
		{name: "a string result", code: http.StatusOK, body: `{"status":"success","data":{"resultType":"string","result":[1,"` + secret + `"]}}`,
			want: "the answer is not a Prometheus query result", notWant: []string{secret}},
		{name: "a closed port", baseURL: closedURL, want: "could not connect",
			notWant: []string{"connection refused", "dial tcp", "connect:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			baseURL := tt.baseURL
			if baseURL == "" {
				srv, _ := prometheus(t, "", tt.code, tt.body)
				baseURL = srv.URL
			}
			_, err := Query(context.Background(), &http.Client{}, baseURL, "up", time.Time{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			for _, s := range tt.notWant {
				assert.NotContains(t, err.Error(), s)
			}
		})
	}
}

// TestScope adds namespace="<ns>" to every selector, keeps one that already says so, and
// refuses one that matches the label otherwise, or a query it cannot parse.
func TestScope(t *testing.T) {
	tests := []struct {
		name    string
		query   string
		want    string
		wantErr string
	}{
		{name: "a selector without namespace gets one", query: `ALERTS{alertstate="firing"}`, want: `ALERTS{alertstate="firing",namespace="ops"}`},
		{name: "a bare metric name", query: `up == 0`, want: `up{namespace="ops"} == 0`},
		{name: "a selector by name only", query: `{__name__=~"kube_pod_.+"}`, want: `{__name__=~"kube_pod_.+",namespace="ops"}`},
		{name: "its own namespace is kept once", query: `up{namespace="ops",job="web"}`, want: `up{job="web",namespace="ops"}`},
		{name: "its own namespace twice", query: `up{namespace="ops",namespace="ops"}`, want: `up{namespace="ops"}`},
		{name: "a range, a subquery, both sides of an operator, offset and @",
			query: `rate(errors_total[5m] offset 1m) / on(job) group_left rate(requests_total[5m]) > 0.1 or max_over_time(up[1h:5m] @ 1700000000) == 0`,
			want:  `rate(errors_total{namespace="ops"}[5m] offset 1m) / on (job) group_left () rate(requests_total{namespace="ops"}[5m]) > 0.1 or max_over_time(up{namespace="ops"}[1h:5m] @ 1700000000.000) == 0`},
		{name: "an aggregation's parameter", query: `topk(scalar(count(up)), up)`, want: `topk(scalar(count(up{namespace="ops"})), up{namespace="ops"})`},
		{name: "absent names the namespace it looked in", query: `absent(up{job="web"})`, want: `absent(up{job="web",namespace="ops"})`},
		{name: "no selector reads nothing", query: `vector(1)`, want: `vector(1)`},
		{name: "a label name written as a string", query: `{"namespace"="ops","__name__"="up"}`, want: `{__name__="up",namespace="ops"}`},

		{name: "another namespace", query: `up{namespace="kube-system"}`,
			wantErr: `the query selects namespace="kube-system": a gate reads its own namespace's series only (namespace="ops", which the operator adds to every selector); leave the matcher out`},
		{name: "another namespace in one selector of two", query: `up{namespace="ops"} and on() up{namespace="monitoring"}`,
			wantErr: `the query selects namespace="monitoring"`},
		{name: "another namespace as a quoted label name", query: `{"namespace"="kube-system","__name__"="up"}`,
			wantErr: `the query selects namespace="kube-system"`},
		{name: "a regular expression, even one matching its own", query: `up{namespace=~"ops"}`, wantErr: `the query selects namespace=~"ops"`},
		{name: "a negative matcher", query: `up{namespace!="ops"}`, wantErr: `the query selects namespace!="ops"`},
		{name: "a negative regular expression", query: `up{namespace!~""}`, wantErr: `the query selects namespace!~""`},
		{name: "its own and another", query: `up{namespace="ops",namespace="other"}`, wantErr: `the query selects namespace="other"`},
		{name: "a query that does not parse", query: `up{`, wantErr: `the query does not parse: 1:4: parse error: unexpected end of input`},
		{name: "an experimental function", query: `info(up)`, wantErr: `the query does not parse`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Scope(tt.query, "ops")
			if tt.wantErr != "" {
				var scopeErr *ScopeError
				require.ErrorAs(t, err, &scopeErr)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Empty(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
