package metrics

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRequestVerbAndResource(t *testing.T) {
	tests := []struct {
		method, url       string
		wantVerb, wantRes string
	}{
		{http.MethodGet, "/apis/stepwise.dev/v1alpha1/pipelines?limit=500", "list", "pipelines"},
		{http.MethodGet, "/apis/stepwise.dev/v1alpha1/pipelines?watch=true&resourceVersion=7", "watch", "pipelines"},
		{http.MethodGet, "/apis/stepwise.dev/v1alpha1/namespaces/ns/pipelines/p", "get", "pipelines"},
		{http.MethodPut, "/apis/stepwise.dev/v1alpha1/namespaces/ns/pipelines/p/status", "update", "pipelines/status"},
		{http.MethodPatch, "/apis/stepwise.dev/v1alpha1/namespaces/ns/pipelines/p", "patch", "pipelines"},
		{http.MethodPost, "/api/v1/namespaces/ns/events", "create", "events"},
		{http.MethodDelete, "/api/v1/namespaces/ns/configmaps", "deletecollection", "configmaps"},
		{http.MethodDelete, "/api/v1/namespaces/ns/configmaps/c", "delete", "configmaps"},
		{http.MethodGet, "/api/v1/namespaces", "list", "namespaces"},
		{http.MethodGet, "/api/v1/namespaces/ns", "get", "namespaces"},
		{http.MethodPut, "/api/v1/namespaces/ns/finalize", "update", "namespaces/finalize"},
		{http.MethodGet, "/api/v1/nodes/n1", "get", "nodes"},
		{http.MethodGet, "/apis/stepwise.dev/v1alpha1", "get", ""},
		{http.MethodGet, "/version", "get", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.url, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.url, nil)
			verb, res := requestVerbAndResource(req)
			assert.Equal(t, tt.wantVerb, verb)
			assert.Equal(t, tt.wantRes, res)
		})
	}
}

func TestAPIRequestsWrapTransportCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := NewAPIRequests(reg)
	failing := errors.New("connection refused")
	rt := a.WrapTransport(roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if strings.Contains(req.URL.Path, "/fail") {
			return nil, failing
		}
		return &http.Response{StatusCode: http.StatusConflict, Body: http.NoBody}, nil
	}))

	for range 2 {
		resp, err := rt.RoundTrip(httptest.NewRequest(http.MethodPut, "/apis/stepwise.dev/v1alpha1/namespaces/ns/pipelines/p/status", nil))
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	_, err := rt.RoundTrip(httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/ns/configmaps/fail", nil))
	require.ErrorIs(t, err, failing)

	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		require.Equal(t, "stepwise_api_requests_total", f.GetName())
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got[labels["verb"]+" "+labels["resource"]+" "+labels["code"]] = m.GetCounter().GetValue()
		}
	}
	assert.Equal(t, map[string]float64{"update pipelines/status 409": 2, "get configmaps error": 1}, got)
}
