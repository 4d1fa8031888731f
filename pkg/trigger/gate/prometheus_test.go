package gate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		name    string
		code    int
		body    string
		want    QueryResult
		wantErr []string
	}{
		{name: "nothing fires: holds", code: http.StatusOK, body: emptyVector, want: QueryResult{}},
		{name: "two alerts fire", code: http.StatusOK, body: firing, want: QueryResult{Series: 2,
			First: `ALERTS{alertname="NodeDown", alertstate="firing", instance="node-3:9100", severity="critical"}`}},
		{name: "warnings are ignored", code: http.StatusOK, body: firingWithWarnings, want: QueryResult{Series: 1,
			First: `ALERTS{alertname="NodeDown", alertstate="firing"}`}},
		{name: "a matrix", code: http.StatusOK, body: matrix, want: QueryResult{Series: 1, First: `up{instance="node-3:9100", job="node"}`}},
		{name: "an empty matrix", code: http.StatusOK, body: emptyMatrix, want: QueryResult{}},
		{name: "a scalar", code: http.StatusOK, body: scalar, want: QueryResult{Series: 1, First: "scalar: 0.97 @[1795939200]"}},

		{name: "a query that does not parse", code: http.StatusBadRequest, body: badData,
			wantErr: []string{"query Prometheus at http://127.0.0.1:", "bad_data: invalid parameter \"query\": 1:8: parse error: unexpected \"}\""}},
		{name: "a query that fails", code: http.StatusUnprocessableEntity, body: execError,
			wantErr: []string{"execution: query processing would load too many samples"}},
		{name: "a proxy's 502", code: http.StatusBadGateway, body: badGateway,
			wantErr: []string{"server_error: server error: 502: <html> <head><title>502 Bad Gateway</title></head>"}},
		{name: "not JSON with 200", code: http.StatusOK, body: "OK", wantErr: []string{"bad_response"}},
		{name: "a string: the API client does not decode it", code: http.StatusOK, body: str,
			wantErr: []string{"query Prometheus at http://127.0.0.1:", `unexpected value type "string"`}},
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

	denied := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return nil, errors.New("egress to 127.0.0.1 denied by policy")
	})}
	_, err = Query(context.Background(), denied, srv.URL, "up", time.Time{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "query Prometheus at "+srv.URL+": egress to 127.0.0.1 denied by policy")

	_, err = Query(context.Background(), nil, srv.URL, "up", time.Time{})
	assert.EqualError(t, err, "query Prometheus at "+srv.URL+": no HTTP client")
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
	assert.Contains(t, err.Error(), fmt.Sprintf("response larger than %d bytes", MaxResponseBytes))
}

// TestQueryBaseURL refuses a base URL that is not http(s) with a host, or holds a user
// or password, and names no part of it that may be secret.
func TestQueryBaseURL(t *testing.T) {
	const secret = "s3cr3t-Pa55"
	tests := []struct {
		name    string
		baseURL string
		wantErr string
	}{
		{name: "a password", baseURL: "https://admin:" + secret + "@prometheus.monitoring:9090", wantErr: "the Prometheus URL must not hold a user or password"},
		{name: "a user", baseURL: "http://" + secret + "@prometheus.monitoring:9090", wantErr: "the Prometheus URL must not hold a user or password"},
		{name: "a password that does not parse", baseURL: "http://admin:" + secret + "%zz@prometheus:9090", wantErr: "the Prometheus URL does not parse"},
		{name: "another scheme", baseURL: "ftp://prometheus.monitoring/", wantErr: "the Prometheus URL must be http or https"},
		{name: "no scheme, a password", baseURL: "admin:" + secret + "@prometheus.monitoring:9090", wantErr: "the Prometheus URL must be http or https"},
		{name: "no scheme", baseURL: "prometheus.monitoring:9090", wantErr: "the Prometheus URL must be http or https"},
		{name: "no host", baseURL: "http:///api", wantErr: "the Prometheus URL has no host"},
		{name: "empty", baseURL: "", wantErr: "the Prometheus URL must be http or https"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Query(context.Background(), http.DefaultClient, tt.baseURL, "up", time.Time{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.NotContains(t, err.Error(), secret)
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
	assert.Contains(t, err.Error(), "query Prometheus at "+srv.URL+"/prom: server_error")
	assert.NotContains(t, err.Error(), secret)
	assert.Equal(t, secret, asked.Form.Get("access_token"), "the base URL's query is still sent")

	refused := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return nil, errors.New("connection refused")
	})}
	_, err = Query(context.Background(), refused, srv.URL+"/prom?access_token="+secret, "up", time.Time{})
	require.Error(t, err)
	assert.Equal(t, "query Prometheus at "+srv.URL+"/prom: connection refused", err.Error())
}
