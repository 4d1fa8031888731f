// Package executor is the engine's side of the executor contract (pkg/contract): the
// TaskExecutor interface, the Request a built-in executor gets (the contract's, plus
// clients that act as the pipeline's ServiceAccount), and the registry that maps executor
// names to implementations.
package executor

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// TaskExecutor does the work of a step; see contract.Hooks for what each hook must do.
type TaskExecutor interface {
	// Name is the name steps use in spec.steps[].executor, e.g. "node.cordon".
	Name() string
	contract.Hooks[*Request]
}

// Clients act as the pipeline's ServiceAccount, never as the operator.
type Clients struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Metadata lists and reads objects' metadata only (nil when the provider has none):
	// what a reader that needs no more should use, so that no object's data is sent.
	Metadata metadata.Interface
	// Mapper maps kinds to resources; discovery data is the same for every identity.
	Mapper meta.RESTMapper
	// Secrets reads Secrets without logging their values at any verbosity (client-go's
	// REST client logs response bodies from -v=8); nil: Kube's.
	Secrets SecretGetter
}

// SecretGetter reads one Secret; the engine reads a step's Secrets through it.
type SecretGetter interface {
	GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
}

// ClientProvider gives the clients that act as a ServiceAccount (a pipeline's, a
// trigger's), by impersonation.
type ClientProvider interface {
	ForServiceAccount(namespace, name string) (*Clients, error)
}

// Request is what a hook is given: the contract's request, plus the clients built-in
// executors act with (plugins get only what the contract carries).
type Request struct {
	contract.Request
	Clients *Clients
}

// Base implements every hook as done at once. Embed it and override only the hooks an
// executor needs.
type Base = contract.Base[*Request]

// Func is a TaskExecutor made of one function that reads the hook from the request: what
// an adapter (the plugin host) or a test fake needs instead of six forwarding methods.
type Func struct {
	ExecutorName string
	Run          func(ctx context.Context, req *Request) (contract.Result, error)
}

var _ TaskExecutor = Func{}

func (f Func) Name() string { return f.ExecutorName }
func (f Func) PreCreate(ctx context.Context, req *Request) (contract.Result, error) {
	return f.Run(ctx, req)
}
func (f Func) Create(ctx context.Context, req *Request) (contract.Result, error) {
	return f.Run(ctx, req)
}
func (f Func) PostCreate(ctx context.Context, req *Request) (contract.Result, error) {
	return f.Run(ctx, req)
}
func (f Func) PreDelete(ctx context.Context, req *Request) (contract.Result, error) {
	return f.Run(ctx, req)
}
func (f Func) Delete(ctx context.Context, req *Request) (contract.Result, error) {
	return f.Run(ctx, req)
}
func (f Func) PostDelete(ctx context.Context, req *Request) (contract.Result, error) {
	return f.Run(ctx, req)
}

// RunHook calls the hook of e that req.Hook names (contract.RunHook).
func RunHook(ctx context.Context, e TaskExecutor, req *Request) (contract.Result, error) {
	return contract.RunHook[*Request](ctx, e, req.Hook, req)
}
