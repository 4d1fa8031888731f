package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

func TestRateLimitedTransport(t *testing.T) {
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) }))
	defer srv.Close()
	// A burst of 2 and a refill far slower than the test: the third request must wait for
	// a token, and gives up when its context ends.
	client := &http.Client{Transport: sdk.RateLimitedTransport(nil, sdk.NewLimiter(0.001, 2))}

	for range 2 {
		resp, err := client.Get(srv.URL)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	_, err = client.Do(req) //nolint:bodyclose // no response on error
	require.Error(t, err)
	var e *sdk.Error
	require.True(t, errors.As(err, &e), "want an *sdk.Error, got %T", err)
	assert.Equal(t, "RateLimited", e.Reason)
	assert.False(t, e.Permanent)
	assert.Equal(t, int32(2), served.Load(), "the limited request never reached the server")
}

// tenantProbe answers, from Create and Plan, the tenant its hook's context carries.
type tenantProbe struct{ sdk.Base }

func (tenantProbe) Name() string { return "test.tenant" }

func (tenantProbe) Create(ctx context.Context, _ *sdk.Request) (sdk.Result, error) {
	ns, ok := sdk.TenantFrom(ctx)
	return sdk.Done(fmt.Sprintf("%q %t", ns, ok)), nil
}

func (tenantProbe) Plan(ctx context.Context, _ *sdk.Request) (sdk.Plan, error) {
	ns, ok := sdk.TenantFrom(ctx)
	return sdk.Plan{Summary: fmt.Sprintf("%q %t", ns, ok)}, nil
}

// TestHooksGetTheirTenantInTheirContext: through the plugin's server, the context of a
// hook and of a plan carries the namespace of the pipeline it runs for, what the tenant
// limiter keys on.
func TestHooksGetTheirTenantInTheirContext(t *testing.T) {
	s := sdk.NewServerWithLogs(io.Discard, tenantProbe{})
	tests := []struct {
		namespace string
		want      string
	}{
		{namespace: "team-a", want: `"team-a" true`},
		{namespace: "", want: `"" false`},
	}
	for _, tt := range tests {
		t.Run(tt.namespace, func(t *testing.T) {
			req := plugintest.Request(sdk.HookCreate, "uid-1", nil)
			req.Pipeline.Namespace = tt.namespace
			in, err := proto.EncodeRequest("test.tenant", req)
			require.NoError(t, err)
			hookResp, err := s.RunHook(t.Context(), in)
			require.NoError(t, err)
			res, err := proto.DecodeOutcome(hookResp)
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.Message, "a hook")
			planResp, err := s.Plan(t.Context(), in)
			require.NoError(t, err)
			plan, err := proto.DecodePlanOutcome(planResp)
			require.NoError(t, err)
			assert.Equal(t, tt.want, plan.Summary, "a plan")
			_, ok := sdk.TenantFrom(t.Context())
			assert.False(t, ok, "no tenant outside a hook")
		})
	}
}

// tenantCall is one request of a test of the TenantLimiter: from the hook of a pipeline
// in namespace tenant ("" outside any hook), to server srv.
type tenantCall struct {
	tenant string
	srv    int
	// wantLimited is in the RateLimited error the call fails with; "" when it passes.
	wantLimited []string
}

// getter is a GET of srv through client from the hook of a pipeline in the namespace it
// is given, under ctx: its error, the response's body closed.
func getter(ctx context.Context, t testing.TB, client *http.Client, srv *httptest.Server) func(namespace string) error {
	return func(namespace string) error {
		req, err := http.NewRequestWithContext(sdk.WithTenant(ctx, namespace), http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		if err == nil {
			assert.NoError(t, resp.Body.Close())
		}
		return err
	}
}

func TestTenantLimiterFailsFast(t *testing.T) {
	var served atomic.Int32
	handler := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) })
	servers := []*httptest.Server{httptest.NewServer(handler), httptest.NewServer(handler)}
	for _, s := range servers {
		defer s.Close()
	}
	host := func(i int) string { return servers[i].Listener.Addr().String() }
	// A refill far slower than the test: what a bucket holds is its burst.
	tenantOf2 := sdk.TenantLimits{TenantQPS: 0.001, TenantBurst: 2, PluginQPS: 1000, PluginBurst: 1000}

	tests := []struct {
		name   string
		limits sdk.TenantLimits
		calls  []tenantCall
	}{
		{
			name:   "tenant A exhausting its bucket fails fast, tenant B still passes",
			limits: tenantOf2,
			calls: []tenantCall{
				{tenant: "team-a"}, {tenant: "team-a"},
				{tenant: "team-a", wantLimited: []string{`namespace "team-a"`, host(0), "0.001 requests a second", "bursts of 2"}},
				{tenant: "team-b"}, {tenant: "team-b"},
				{tenant: "team-a", wantLimited: []string{`namespace "team-a"`}},
			},
		},
		{
			name:   "each host of a tenant has its own bucket",
			limits: tenantOf2,
			calls: []tenantCall{
				{tenant: "team-a"}, {tenant: "team-a"},
				{tenant: "team-a", wantLimited: []string{host(0)}},
				{tenant: "team-a", srv: 1},
			},
		},
		{
			name:   "a request without a tenant has a bucket of its own, not a free pass",
			limits: tenantOf2,
			calls: []tenantCall{
				{}, {},
				{wantLimited: []string{"outside any hook", host(0)}},
				{tenant: "team-a"},
				{wantLimited: []string{"outside any hook"}},
			},
		},
		{
			name:   "the plugin's bucket, shared by every tenant, fails fast too",
			limits: sdk.TenantLimits{TenantQPS: 1000, TenantBurst: 1000, PluginQPS: 0.001, PluginBurst: 2, MaxWait: 50 * time.Millisecond},
			calls: []tenantCall{
				{tenant: "team-a"}, {tenant: "team-b"},
				{tenant: "team-c", wantLimited: []string{"every namespace", "0.001 requests a second", "bursts of 2", "50ms"}},
			},
		},
		{
			name:   "the plugin's bucket waits within its bound",
			limits: sdk.TenantLimits{TenantQPS: 1000, TenantBurst: 1000, PluginQPS: 20, PluginBurst: 1, MaxWait: time.Second},
			calls:  []tenantCall{{tenant: "team-a"}, {tenant: "team-b"}, {tenant: "team-c"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &http.Client{Transport: sdk.NewTenantLimiter(tt.limits).Transport(nil)}
			// A limiter that waits instead of failing would hold the test until here.
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			for i, call := range tt.calls {
				served.Store(0)
				req, err := http.NewRequestWithContext(sdk.WithTenant(ctx, call.tenant), http.MethodGet, servers[call.srv].URL, nil)
				require.NoError(t, err)
				start := time.Now()
				resp, err := client.Do(req)
				assert.Less(t, time.Since(start), time.Second, "call %d: fails fast or passes, never waits long", i)
				if len(call.wantLimited) == 0 {
					require.NoError(t, err, "call %d", i)
					require.NoError(t, resp.Body.Close())
					assert.Equal(t, int32(1), served.Load(), "call %d reached its server", i)
					continue
				}
				var e *sdk.Error
				require.ErrorAs(t, err, &e, "call %d", i)
				assert.Equal(t, "RateLimited", e.Reason, "call %d", i)
				assert.False(t, e.Permanent, "call %d", i)
				for _, want := range call.wantLimited {
					assert.Contains(t, e.Error(), want, "call %d", i)
				}
				assert.Zero(t, served.Load(), "call %d never reached its server", i)
			}
		})
	}
}

// TestTenantLimiterKeepsABoundedNumberOfBuckets: every namespace and host has its bucket,
// but the limiter keeps only the most recently used, so that a plugin serving many
// tenants holds a bounded memory; a bucket that goes comes back full.
func TestTenantLimiterKeepsABoundedNumberOfBuckets(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	l := sdk.NewTenantLimiter(sdk.TenantLimits{TenantQPS: 0.001, TenantBurst: 1, PluginQPS: 1000, PluginBurst: 1000, MaxBuckets: 3})
	client := &http.Client{Transport: l.Transport(nil)}
	get := getter(t.Context(), t, client, srv)

	require.NoError(t, get("team-0"))
	require.Error(t, get("team-0"), "team-0's bucket is empty")
	for i := 1; i <= 10; i++ {
		require.NoError(t, get(fmt.Sprintf("team-%d", i)))
		assert.LessOrEqual(t, l.Buckets(), 3)
	}
	assert.Equal(t, 3, l.Buckets())
	assert.NoError(t, get("team-0"), "team-0's bucket went, the least recently used")
}

// TestTenantLimiterCountsConcurrentRequests: requests of many hooks at once take exactly
// their namespace's burst, each namespace its own.
func TestTenantLimiterCountsConcurrentRequests(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	const burst, callers = 5, 16
	client := &http.Client{Transport: sdk.NewTenantLimiter(sdk.TenantLimits{
		TenantQPS: 0.001, TenantBurst: burst, PluginQPS: 1000, PluginBurst: 1000,
	}).Transport(nil)}
	tenants := []string{"team-a", "team-b", ""}
	passed := make([]atomic.Int32, len(tenants))
	var wg sync.WaitGroup
	for i, tenant := range tenants {
		for range callers {
			wg.Go(func() {
				req, err := http.NewRequestWithContext(sdk.WithTenant(t.Context(), tenant), http.MethodGet, srv.URL, nil)
				if !assert.NoError(t, err) {
					return
				}
				if resp, err := client.Do(req); err == nil {
					_ = resp.Body.Close()
					passed[i].Add(1)
				}
			})
		}
	}
	wg.Wait()
	for i, tenant := range tenants {
		assert.Equal(t, int32(burst), passed[i].Load(), "namespace %q", tenant)
	}
}

// TestTenantLimiterDelaysAnotherNamespaceAtAnyWorkers: the busy namespaces hold all the
// engine's workers but one (fairqueue.Shares), every hook of theirs sending a request
// once the plugin's burst is spent, so that as many requests wait in the plugin's bucket
// as it lets wait (PluginQPS × MaxWait). Another namespace's request, from the last
// worker, is then delayed, never refused, whatever --workers is: a fixed bound on the
// requests waiting, reached at 11 workers with the plugins' limits, must not turn
// another namespace's hook into a failed attempt (and, retry after retry, a failed step
// counted against its trigger's failure budget). The busy namespaces' requests beyond
// what may wait still fail fast.
func TestTenantLimiterDelaysAnotherNamespaceAtAnyWorkers(t *testing.T) {
	// The limits of the plugins of this repository (plugins/*/main.go).
	vsphere := sdk.TenantLimits{TenantQPS: 5, TenantBurst: 35, PluginQPS: 10, PluginBurst: 20}
	cloud := sdk.TenantLimits{TenantQPS: 5, TenantBurst: 10, PluginQPS: 10, PluginBurst: 20} // aws, openstack, webhook
	tests := []struct {
		name    string
		limits  sdk.TenantLimits
		workers int
		busy    int // namespaces holding the workers but one
	}{
		{name: "vsphere, 8 workers, 1 busy namespace", limits: vsphere, workers: 8, busy: 1},
		{name: "vsphere, 11 workers, 1 busy namespace", limits: vsphere, workers: 11, busy: 1},
		{name: "vsphere, 16 workers, 1 busy namespace", limits: vsphere, workers: 16, busy: 1},
		{name: "vsphere, 32 workers, 2 busy namespaces", limits: vsphere, workers: 32, busy: 2},
		{name: "cloud, 8 workers, 3 busy namespaces", limits: cloud, workers: 8, busy: 3},
		{name: "cloud, 32 workers, 3 busy namespaces", limits: cloud, workers: 32, busy: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			defer srv.Close()
			client := &http.Client{Transport: sdk.NewTenantLimiter(tt.limits).Transport(nil)}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // as the engine bounds a call
			defer cancel()
			get := getter(ctx, t, client, srv)
			busy := func(i int) string { return fmt.Sprintf("busy-%d", i%tt.busy) }

			// The busy namespaces spend the plugin's burst...
			burstStart := time.Now()
			for i := range tt.limits.PluginBurst {
				require.NoError(t, get(busy(i)), "request %d of the burst", i)
			}
			// ...then each of their hooks sends a request: as many wait as may, the others fail fast.
			var wg sync.WaitGroup
			defer wg.Wait()
			var passed atomic.Int32
			for i := range tt.workers - 1 {
				wg.Go(func() {
					if get(busy(i)) == nil {
						passed.Add(1)
					}
				})
			}
			time.Sleep(20 * time.Millisecond) // the busy hooks' requests are waiting, or refused
			// Tokens the bucket gained while the burst was spent and the hooks' requests
			// came (slow on a loaded machine): as many more pass without waiting.
			refilled := int32(tt.limits.PluginQPS * time.Since(burstStart).Seconds())

			start := time.Now()
			err := get("other")
			require.NoError(t, err, "another namespace's request is delayed, not refused")
			assert.Less(t, time.Since(start), 5*time.Second, "delayed by the requests waiting before it, no more")
			wg.Wait()
			// What may wait, each busy namespace's share rounded up.
			maxWaiting := int32(tt.limits.PluginQPS*sdk.DefaultMaxWait.Seconds()) + int32(tt.busy) - 1
			assert.LessOrEqual(t, passed.Load(), maxWaiting+refilled, "the busy namespaces' requests beyond what may wait fail fast (%d tokens refilled)", refilled)
		})
	}
}

// TestTenantLimiterSharesTheWaitsBetweenNamespaces: the requests that may wait for the
// plugin's bucket (PluginQPS × MaxWait) are shared between the namespaces waiting: a
// namespace that has its share waiting fails fast, naming it, and another namespace's
// request waits even past MaxWait.
func TestTenantLimiterSharesTheWaitsBetweenNamespaces(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	// One request may wait (10 a second × 100 ms), after the burst of one.
	limiter := sdk.NewTenantLimiter(sdk.TenantLimits{
		TenantQPS: 1000, TenantBurst: 1000, PluginQPS: 10, PluginBurst: 1, MaxWait: 100 * time.Millisecond,
	})
	client := &http.Client{Transport: limiter.Transport(nil)}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	get := getter(ctx, t, client, srv)

	require.NoError(t, get("team-a"), "the burst")
	waited := make(chan error, 1)
	go func() { waited <- get("team-a") }() // waits 100 ms: the one that may wait
	require.Eventually(t, func() bool { return limiter.Waiting("team-a") == 1 }, 5*time.Second, time.Millisecond,
		"team-a's second request never waited")

	tests := []struct {
		namespace   string
		wantLimited []string // "" when it passes
	}{
		{namespace: "team-a", wantLimited: []string{`namespace "team-a" has 1 of its requests waiting`, "its share while 1 namespaces wait", "100ms"}},
		{namespace: "team-b"}, // waits about 200 ms, over MaxWait: none of its requests wait
	}
	for _, tt := range tests {
		start := time.Now()
		err := get(tt.namespace)
		if len(tt.wantLimited) == 0 {
			require.NoError(t, err, tt.namespace)
			assert.Greater(t, time.Since(start), 100*time.Millisecond, "%s waited past MaxWait", tt.namespace)
			continue
		}
		var e *sdk.Error
		require.ErrorAs(t, err, &e, tt.namespace)
		assert.Equal(t, "RateLimited", e.Reason)
		assert.False(t, e.Permanent)
		for _, want := range tt.wantLimited {
			assert.Contains(t, e.Error(), want, tt.namespace)
		}
		assert.Less(t, time.Since(start), 50*time.Millisecond, "%s failed fast", tt.namespace)
	}
	require.NoError(t, <-waited)
}
