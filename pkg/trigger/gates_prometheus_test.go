package trigger

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/egress"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
)

const (
	promEmpty  = `{"status":"success","data":{"resultType":"vector","result":[]}}`
	promFiring = `{"status":"success","data":{"resultType":"vector","result":[` +
		`{"metric":{"__name__":"ALERTS","alertname":"PodCrashLooping","namespace":"ns"},"value":[1700000000,"1"]}]}}`
)

// recordingProm is a Prometheus that answers code and body to every query and records
// the queries it was asked.
type recordingProm struct {
	*httptest.Server
	mu    sync.Mutex
	asked []string
}

func newRecordingProm(t *testing.T, code int, body string) *recordingProm {
	t.Helper()
	p := &recordingProm{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		p.mu.Lock()
		p.asked = append(p.asked, r.Form.Get("query"))
		p.mu.Unlock()
		if len(body) > 0 && body[0] == '{' {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *recordingProm) queries() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.asked...)
}

// gatePolicy is the egress policy of the tenants' gates in these tests, as the operator
// makes it by default (public addresses refused), with the loopback range of the test
// servers allowed as an admin would allow the Prometheus' range.
func gatePolicy() *egress.Policy {
	return egress.New(netip.MustParsePrefix("127.0.0.0/8")).RefusingPublic()
}

// guardedClient is the client of policy, as the operator builds it, with a guard behind
// the policy: whatever the policy lets through, a test connects to loopback only, so that
// a policy that fails to refuse a public address sends nothing there.
func guardedClient(policy *egress.Policy) *http.Client {
	d := policy.Dialer()
	d.Control = func(network, address string, c syscall.RawConn) error {
		if err := policy.Control(network, address, c); err != nil {
			return err
		}
		if ap, err := netip.ParseAddrPort(address); err != nil || !ap.Addr().IsLoopback() {
			return errors.New("test guard: only loopback")
		}
		return nil
	}
	t := policy.Transport(nil)
	t.DialContext = d.DialContext
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// TestAPrometheusGateReadsItsNamespaceOnly: the operator adds namespace="<the trigger's
// namespace>" to every selector of a tenant's query, refuses a query that names another,
// refuses public addresses, and writes to the status neither an answer's bytes nor the
// OS's error text.
func TestAPrometheusGateReadsItsNamespaceOnly(t *testing.T) {
	const secret = "banner-of-an-internal-service"
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	tests := []struct {
		name  string
		query string
		// url is the gate's URL; empty: the test's Prometheus.
		url         string
		code        int
		body        string
		wantAsked   []string
		wantHolds   bool
		wantMessage string
		notWant     []string
	}{
		{name: "a query without namespace gets one", query: `ALERTS{alertstate="firing"}`, code: 200, body: promEmpty,
			wantAsked: []string{`ALERTS{alertstate="firing",namespace="ns"}`}, wantHolds: true},
		{name: "a query naming its own namespace keeps one matcher", query: `up{namespace="ns",job="web"} == 0`, code: 200, body: promEmpty,
			wantAsked: []string{`up{job="web",namespace="ns"} == 0`}, wantHolds: true},
		{name: "every selector, in ranges, subqueries and both sides of an operator",
			query: `sum(rate(http_requests_total{code=~"5.."}[5m])) > 1 or max_over_time(up[1h:5m]) == 0`, code: 200, body: promEmpty,
			wantAsked: []string{`sum(rate(http_requests_total{code=~"5..",namespace="ns"}[5m])) > 1 or max_over_time(up{namespace="ns"}[1h:5m]) == 0`},
			wantHolds: true},
		{name: "series of the scoped query are named", query: `ALERTS`, code: 200, body: promFiring,
			wantAsked:   []string{`ALERTS{namespace="ns"}`},
			wantMessage: `the query returns 1 series, first ALERTS{alertname="PodCrashLooping", namespace="ns"}`},
		{name: "a query naming another namespace is refused", query: `up{namespace="kube-system"}`, code: 200, body: promEmpty,
			wantMessage: `the query selects namespace="kube-system": a gate reads its own namespace's series only`},
		{name: "a regular expression over namespaces is refused", query: `count(up{namespace=~".+"})`, code: 200, body: promEmpty,
			wantMessage: `the query selects namespace=~".+": a gate reads its own namespace's series only`},
		{name: "a query that does not parse is refused before it is sent", query: `up{`, code: 200, body: promEmpty,
			wantMessage: `the query does not parse: 1:4: parse error: unexpected end of input`},
		{name: "a public address is refused", url: "http://8.8.8.8:9090", query: "up",
			wantMessage: "query Prometheus at http://8.8.8.8:9090: refused: the address is not allowed", notWant: []string{"test guard"}},
		{name: "an answer's bytes appear nowhere", query: "up", code: http.StatusBadGateway, body: "<h1>502</h1>" + secret,
			wantAsked:   []string{`up{namespace="ns"}`},
			wantMessage: "the Prometheus answered 502", notWant: []string{secret, "<h1>"}},
		{name: "a dial error's text appears nowhere", url: closedURL, query: "up",
			wantMessage: "could not connect", notWant: []string{"connection refused", "dial tcp", "connect:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prom := newRecordingProm(t, tt.code, tt.body)
			url := tt.url
			if url == "" {
				url = prom.URL
			}
			trig := triggertest.Trigger()
			trig.Spec.Gates = []v1alpha1.HealthGate{{Name: "prom", Prometheus: &v1alpha1.PrometheusGate{URL: url, Query: tt.query}}}
			f := newFixture(t, objs(newTemplate("retire-node"), trig, triggertest.ReadyNode("old", 0, retiring)))
			f.c.gateHTTP = guardedClient(gatePolicy())

			f.sync("retire")
			assert.Equal(t, tt.wantAsked, prom.queries())
			got := f.trigger("retire")
			require.Len(t, got.Status.Gates, 1)
			assert.Equal(t, tt.wantHolds, got.Status.Gates[0].Holds)
			message := got.Status.Gates[0].Message
			assert.Contains(t, message, tt.wantMessage)
			ready := readyOf(got)
			for _, s := range tt.notWant {
				assert.NotContains(t, message, s)
				assert.NotContains(t, ready.Message, s)
			}
			if tt.wantHolds {
				assert.Len(t, f.pipelineList(), 1)
			} else {
				assert.Empty(t, f.pipelineList())
			}
		})
	}
}

// TestTheAdminsPrometheusWins: where an operator admin set a Prometheus URL for the
// trigger's namespace (--gate-prometheus-url-for), the gate queries it, with the query
// as written, whatever URL the gate names; other namespaces' gates are not concerned.
func TestTheAdminsPrometheusWins(t *testing.T) {
	const secret = "admins-proxy-banner"
	tests := []struct {
		name string
		// adminFor is the namespace of the admin's URL.
		adminFor     string
		noTenantHTTP bool
		adminCode    int
		adminBody    string
		wantAdmin    []string
		wantTenant   []string
		wantHolds    bool
		wantMessage  string
		notWant      []string
	}{
		{name: "the namespace's URL wins, the query as written", adminFor: "ns", adminCode: 200, adminBody: promEmpty,
			wantAdmin: []string{`ALERTS{namespace="kube-system"}`}, wantHolds: true},
		{name: "even where tenants' URLs are not queried", adminFor: "ns", noTenantHTTP: true, adminCode: 200, adminBody: promFiring,
			wantAdmin:   []string{`ALERTS{namespace="kube-system"}`},
			wantMessage: `the query returns 1 series, first ALERTS{alertname="PodCrashLooping", namespace="ns"}`},
		{name: "its failures are told without its address nor its bytes", adminFor: "ns", adminCode: http.StatusBadGateway, adminBody: secret,
			wantAdmin:   []string{`ALERTS{namespace="kube-system"}`},
			wantMessage: "query the namespace's Prometheus (set by the operator admin): the Prometheus answered 502", notWant: []string{secret, "127.0.0.1"}},
		{name: "another namespace's URL does not apply", adminFor: "other", adminCode: 200, adminBody: promEmpty,
			wantMessage: `the query selects namespace="kube-system"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			admin := newRecordingProm(t, tt.adminCode, tt.adminBody)
			tenant := newRecordingProm(t, 200, promEmpty)
			trig := triggertest.Trigger()
			trig.Spec.Gates = []v1alpha1.HealthGate{{Name: "prom", Prometheus: &v1alpha1.PrometheusGate{
				URL: tenant.URL, Query: `ALERTS{namespace="kube-system"}`}}}
			f := newFixture(t, objs(newTemplate("retire-node"), trig, triggertest.ReadyNode("old", 0, retiring)))
			f.c.gateHTTP = guardedClient(gatePolicy())
			if tt.noTenantHTTP {
				f.c.gateHTTP = nil
			}
			f.c.gateAdminHTTP = admin.Client()
			f.c.gatePrometheusURLs = map[string]string{tt.adminFor: admin.URL + "/?namespace=" + tt.adminFor}

			f.sync("retire")
			assert.Equal(t, tt.wantAdmin, admin.queries())
			assert.Equal(t, tt.wantTenant, tenant.queries())
			got := f.trigger("retire")
			require.Len(t, got.Status.Gates, 1)
			assert.Equal(t, tt.wantHolds, got.Status.Gates[0].Holds)
			assert.Contains(t, got.Status.Gates[0].Message, tt.wantMessage)
			for _, s := range tt.notWant {
				assert.NotContains(t, got.Status.Gates[0].Message, s)
				assert.NotContains(t, readyOf(got).Message, s)
			}
		})
	}
}
