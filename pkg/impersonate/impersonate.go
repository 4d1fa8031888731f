// Package impersonate builds Kubernetes clients that act as a pipeline's ServiceAccount,
// so that executors can do only what that ServiceAccount's RBAC allows (the multi-tenancy
// model of Flux's serviceAccountName), never what the operator itself may do.
package impersonate

import (
	"fmt"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"k8s.io/utils/lru"

	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// DefaultMaxClients is how many client sets a provider keeps unless told otherwise: more
// ServiceAccounts than pipelines and triggers usually name at once, few enough that a
// tenant naming thousands cannot grow the operator.
const DefaultMaxClients = 256

// Option changes a provider made by NewClientProvider.
type Option func(*ClientProvider)

// WithMaxClients keeps at most n client sets (DefaultMaxClients when n < 1); the least
// recently used one is dropped, and made again when its ServiceAccount is named again.
func WithMaxClients(n int) Option {
	return func(p *ClientProvider) {
		if n >= 1 {
			p.maxClients = n
		}
	}
}

// ClientProvider hands out clients that impersonate ServiceAccounts. Every client set goes
// through one transport made from the operator's config, so that they share its
// connections and credentials however many identities there are; only the few most
// recently used client sets are kept.
type ClientProvider struct {
	base       *rest.Config
	mapper     meta.RESTMapper
	maxClients int

	mu sync.Mutex
	// shared is the operator's transport (TLS, credentials, connection pool) without
	// impersonation, made on first use.
	shared http.RoundTripper
	// clients are the kept client sets by impersonated user name, at most maxClients.
	clients *lru.Cache
}

// NewClientProvider returns a provider whose clients copy base (address, credentials,
// rate limits) and add impersonation. Discovery data does not depend on who asks, so one
// RESTMapper serves every identity.
func NewClientProvider(base *rest.Config, mapper meta.RESTMapper, opts ...Option) *ClientProvider {
	p := &ClientProvider{base: rest.CopyConfig(base), mapper: mapper, maxClients: DefaultMaxClients}
	for _, o := range opts {
		o(p)
	}
	p.clients = lru.New(p.maxClients)
	return p
}

// ForServiceAccount returns clients acting as system:serviceaccount:NAMESPACE:NAME. The
// API server adds the ServiceAccount's groups itself.
func (p *ClientProvider) ForServiceAccount(namespace, name string) (*executor.Clients, error) {
	user := "system:serviceaccount:" + namespace + ":" + name
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients.Get(user); ok {
		return c.(*executor.Clients), nil
	}
	shared, err := p.sharedTransport()
	if err != nil {
		return nil, err
	}
	// client-go applies cfg.Impersonate only when it builds a transport itself, not to an
	// http.Client it is given: the impersonation wraps the shared transport here instead.
	cfg := rest.CopyConfig(p.base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	httpClient := &http.Client{
		Transport: transport.NewImpersonatingRoundTripper(transport.ImpersonationConfig{UserName: user}, shared),
		Timeout:   cfg.Timeout,
	}
	kube, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", user, err)
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("dynamic client for %s: %w", user, err)
	}
	md, err := metadata.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metadata client for %s: %w", user, err)
	}
	secrets, err := newSecretReader(cfg.Host+cfg.APIPath, httpClient)
	if err != nil {
		return nil, fmt.Errorf("the Secret reader for %s: %w", user, err)
	}
	c := &executor.Clients{Kube: kube, Dynamic: dyn, Metadata: md, Mapper: p.mapper, Secrets: secrets}
	p.clients.Add(user, c)
	return c, nil
}

// sharedTransport returns the transport every client set goes through, made on first
// use; a failure is returned, and the next call tries again. The caller holds p.mu.
func (p *ClientProvider) sharedTransport() (http.RoundTripper, error) {
	if p.shared != nil {
		return p.shared, nil
	}
	cfg := rest.CopyConfig(p.base)
	// Who is impersonated is the business of each client set's wrapper.
	cfg.Impersonate = rest.ImpersonationConfig{}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("transport for impersonating clients to %s: %w", cfg.Host, err)
	}
	p.shared = rt
	return rt, nil
}
