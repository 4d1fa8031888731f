// Package impersonate builds Kubernetes clients that act as a pipeline's ServiceAccount,
// so that executors can do only what that ServiceAccount's RBAC allows (the multi-tenancy
// model of Flux's serviceAccountName), never what the operator itself may do.
package impersonate

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// ClientProvider hands out clients that impersonate ServiceAccounts, one set per
// ServiceAccount, made once and reused: they share the operator's connection pool.
type ClientProvider struct {
	base   *rest.Config
	mapper meta.RESTMapper

	mu      sync.Mutex
	clients map[string]*executor.Clients
}

// NewClientProvider returns a provider whose clients copy base (address, credentials,
// rate limits) and add impersonation. Discovery data does not depend on who asks, so one
// RESTMapper serves every identity.
func NewClientProvider(base *rest.Config, mapper meta.RESTMapper) *ClientProvider {
	return &ClientProvider{base: base, mapper: mapper, clients: map[string]*executor.Clients{}}
}

// ForServiceAccount returns clients acting as system:serviceaccount:NAMESPACE:NAME. The
// API server adds the ServiceAccount's groups itself.
func (p *ClientProvider) ForServiceAccount(namespace, name string) (*executor.Clients, error) {
	user := "system:serviceaccount:" + namespace + ":" + name
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[user]; ok {
		return c, nil
	}
	cfg := rest.CopyConfig(p.base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", user, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client for %s: %w", user, err)
	}
	c := &executor.Clients{Kube: kube, Dynamic: dyn, Mapper: p.mapper}
	p.clients[user] = c
	return c, nil
}
