package e2e

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

// TestTheMetricsAreServedOnlyToWhomTheAPIServerAllows: the operator's /metrics names every
// namespace's triggers, so it answers only a caller the real API server authenticates
// (TokenReview) and authorizes (SubjectAccessReview) to get it: a ServiceAccount bound to
// the install's stepwise-metrics-reader, not one without it, nor anyone without a token,
// nor a client that does not speak TLS.
func TestTheMetricsAreServedOnlyToWhomTheAPIServerAllows(t *testing.T) {
	ctx := t.Context()
	require.NoError(t, operator.WaitReady(ctx))
	require.NoError(t, cluster.InstallMetricsReaderRole(ctx))
	ns := cluster.CreateNamespace(t)
	cluster.ServiceAccount(t, ns, "scraper")
	cluster.ServiceAccount(t, ns, "tenant")
	cluster.BindClusterWide(t, ns, "scraper", framework.MetricsReaderRole)
	token := func(sa string) string {
		tok, err := cluster.ServiceAccountToken(ctx, ns, sa)
		require.NoError(t, err)
		return tok
	}
	profiles := strings.TrimSuffix(operator.MetricsURL, "/metrics") + "/debug/pprof/"

	cases := []struct {
		name  string
		token string
		url   string
		want  int
	}{
		{name: "no token", url: operator.MetricsURL, want: http.StatusUnauthorized},
		{name: "a token the API server never issued", token: "forged." + token("scraper")[7:], url: operator.MetricsURL, want: http.StatusUnauthorized},
		{name: "a tenant's ServiceAccount", token: token("tenant"), url: operator.MetricsURL, want: http.StatusForbidden},
		{name: "the scraper bound to stepwise-metrics-reader", token: token("scraper"), url: operator.MetricsURL, want: http.StatusOK},
		{name: "the scraper, for the profiles it was not granted", token: token("scraper"), url: profiles, want: http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client, err := cluster.MetricsClient(tc.token)
			require.NoError(t, err)
			body, code := getBody(t, client, tc.url)
			assert.Equal(t, tc.want, code, body)
			if tc.want == http.StatusOK {
				assert.Contains(t, body, "stepwise_", "the operator's own series")
			} else {
				assert.NotContains(t, body, "stepwise_")
			}
		})
	}

	t.Run("plain HTTP", func(t *testing.T) {
		plain := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}}
		_, code := getBody(t, plain, "http"+strings.TrimPrefix(operator.MetricsURL, "https"))
		assert.Equal(t, http.StatusBadRequest, code, "Go's TLS server answers an HTTP request with 400")
	})
}

func getBody(t *testing.T, client *http.Client, url string) (string, int) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	require.NoError(t, err)
	return string(body), resp.StatusCode
}
