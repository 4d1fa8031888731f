package sdk

import "context"

// tenantKey is the context key of the namespace of the pipeline a hook runs for.
type tenantKey struct{}

// WithTenant is ctx carrying namespace as its tenant, which TenantFrom gives; an empty
// namespace is no tenant. The SDK sets it in the context of every hook; a plugin sets it
// itself only for what a hook's client sends with a context of its own (a library's
// clean-up with context.Background), so that it counts as the hook's namespace's.
func WithTenant(ctx context.Context, namespace string) context.Context {
	if namespace == "" {
		return ctx
	}
	return context.WithValue(ctx, tenantKey{}, namespace)
}

// TenantFrom is the tenant of the hook (or plan) whose context ctx is: the namespace of
// the pipeline it runs for. One plugin process serves every namespace, so what a plugin
// shares among hooks (a rate limit, a cache, a connection pool) is kept apart by it, as
// TenantLimiter does. ok is false outside a hook.
func TenantFrom(ctx context.Context) (namespace string, ok bool) {
	namespace, ok = ctx.Value(tenantKey{}).(string)
	return namespace, ok
}
