package impersonate

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// apiServer is an httptest server that answers every request with an empty Namespace,
// and records who each request impersonates and how many connections were opened.
type apiServer struct {
	*httptest.Server

	mu    sync.Mutex
	users []string
	conns int
}

func newAPIServer(t *testing.T) *apiServer {
	t.Helper()
	s := &apiServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.users = append(s.users, r.Header.Get(transport.ImpersonateUserHeader))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprint(w, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ns"}}`)
	}))
	s.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// seen returns the impersonated users recorded since the last call, and forgets them.
func (s *apiServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	users := s.users
	s.users = nil
	return users
}

func (s *apiServer) connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// baseConfig is the operator's own config against s. Its Proxy function (no proxy) is
// what an operator behind a proxy has: client-go cannot use a function as a key of its
// own transport cache, so only the provider's sharing keeps the connections few.
func baseConfig(s *apiServer) *rest.Config {
	return &rest.Config{
		Host:        s.URL,
		BearerToken: "operator-token",
		Proxy:       func(*http.Request) (*url.URL, error) { return nil, nil },
	}
}

// getNamespace makes one request with each client of the set, typed then dynamic.
func getNamespace(t *testing.T, p *ClientProvider, sa string) {
	t.Helper()
	c, err := p.ForServiceAccount("tenant", sa)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = c.Kube.CoreV1().Namespaces().Get(ctx, "ns", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = c.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(ctx, "ns", metav1.GetOptions{})
	require.NoError(t, err)
}

func user(sa string) string { return "system:serviceaccount:tenant:" + sa }

// TestClientsAreBounded: however many ServiceAccounts are named, at most maxClients
// client sets are kept; the most recently used one stays.
func TestClientsAreBounded(t *testing.T) {
	tests := []struct {
		name       string
		opts       []Option
		identities int
		want       int
	}{
		{name: "a tenant looping over 20000 names: the default bound", identities: 20000, want: DefaultMaxClients},
		{name: "bound of 10", opts: []Option{WithMaxClients(10)}, identities: 1000, want: 10},
		{name: "fewer identities than the bound", opts: []Option{WithMaxClients(10)}, identities: 3, want: 3},
		{name: "a bound below 1 is the default", opts: []Option{WithMaxClients(0)}, identities: 1000, want: DefaultMaxClients},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A user agent of its own spares client-go working out its default 20000 times.
			p := NewClientProvider(&rest.Config{Host: "https://127.0.0.1:1", UserAgent: "stepwise-test"}, nil, tt.opts...)
			first, err := p.ForServiceAccount("tenant", "sa-0")
			require.NoError(t, err)
			for i := range tt.identities {
				_, err := p.ForServiceAccount("tenant", fmt.Sprintf("sa-%d", i))
				require.NoError(t, err)
			}
			assert.Equal(t, tt.want, p.clients.Len())
			last, err := p.ForServiceAccount("tenant", fmt.Sprintf("sa-%d", tt.identities-1))
			require.NoError(t, err)
			again, err := p.ForServiceAccount("tenant", fmt.Sprintf("sa-%d", tt.identities-1))
			require.NoError(t, err)
			assert.Same(t, last, again, "a kept client set is reused")
			if tt.identities > tt.want {
				recreated, err := p.ForServiceAccount("tenant", "sa-0")
				require.NoError(t, err)
				assert.NotSame(t, first, recreated, "an evicted client set is made again")
			}
		})
	}
}

// TestClientsImpersonate: every client of a set, typed or dynamic, sends the
// Impersonate-User header of its own ServiceAccount (never the operator's identity, never
// another tenant's), also when made again after its eviction, over the one shared
// transport.
func TestClientsImpersonate(t *testing.T) {
	s := newAPIServer(t)
	p := NewClientProvider(baseConfig(s), nil, WithMaxClients(2))
	steps := []struct {
		sa   string
		what string
	}{
		{sa: "sa-1", what: "first client set"},
		{sa: "sa-2", what: "second client set"},
		{sa: "sa-1", what: "kept client set"},
		{sa: "sa-3", what: "evicts sa-2"},
		{sa: "sa-4", what: "evicts sa-1"},
		{sa: "sa-1", what: "sa-1 made again"},
		{sa: "sa-2", what: "sa-2 made again"},
	}
	for _, step := range steps {
		getNamespace(t, p, step.sa)
		assert.Equal(t, []string{user(step.sa), user(step.sa)}, s.seen(), step.what)
	}
	assert.LessOrEqual(t, p.clients.Len(), 2)
}

// TestTransportIsShared: the client sets of many identities share one transport, so
// their requests reuse the same connections instead of opening some per identity.
func TestTransportIsShared(t *testing.T) {
	s := newAPIServer(t)
	p := NewClientProvider(baseConfig(s), nil, WithMaxClients(8))
	const identities = 100
	for i := range identities {
		getNamespace(t, p, fmt.Sprintf("sa-%d", i))
	}
	assert.Len(t, s.seen(), 2*identities)
	assert.LessOrEqual(t, s.connections(), 2, "sequential requests of every identity reuse the idle connection")
}

// TestSharedTransportFailure: a base config no transport can be made of is an error of
// ForServiceAccount, not a panic, and a later call tries again.
func TestSharedTransportFailure(t *testing.T) {
	p := NewClientProvider(&rest.Config{Host: "https://127.0.0.1:1", BearerToken: "t", Username: "u", Password: "p"}, nil)
	for range 2 {
		_, err := p.ForServiceAccount("tenant", "sa-1")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "transport for impersonating clients")
	}
	assert.Zero(t, p.clients.Len())
}
