package sdk

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/lru"
)

// reasonRateLimited is the reason of a request the client-side rate limit refused.
const reasonRateLimited = "RateLimited"

// RateLimitedTransport limits the HTTP requests a plugin makes to its cloud API with one
// bucket for all: requests wait for a token (or their context); base nil means
// http.DefaultTransport.
//
// Deprecated: one plugin process serves every namespace, and with one bucket that waits,
// one namespace's retry storm holds every other namespace's hooks. Use TenantLimiter.
func RateLimitedTransport(base http.RoundTripper, limiter *rate.Limiter) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &rateLimitedTransport{base: base, limiter: limiter}
}

// NewLimiter is a token bucket of qps requests a second with bursts of up to burst.
func NewLimiter(qps float64, burst int) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(qps), burst)
}

type rateLimitedTransport struct {
	base    http.RoundTripper
	limiter *rate.Limiter
}

func (t *rateLimitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.limiter.Wait(req.Context()); err != nil {
		return nil, Retryable(reasonRateLimited, fmt.Errorf("client-side rate limit of the cloud API: %w", err))
	}
	return t.base.RoundTrip(req)
}

// Defaults of TenantLimits.
const (
	// DefaultMaxWait is how long a request waits at most for the plugin's bucket: long
	// enough to smooth a burst, short enough not to hold the engine's worker.
	DefaultMaxWait = time.Second
	// DefaultMaxBuckets is how many (namespace, host) buckets a TenantLimiter keeps.
	DefaultMaxBuckets = 4096
)

// TenantLimits are the rates of a TenantLimiter. A burst of 0 lets no request through.
type TenantLimits struct {
	// TenantQPS and TenantBurst are the bucket of each tenant and host: the requests a
	// second, and the most at once, that the hooks of one namespace's pipelines send to
	// one host.
	TenantQPS   float64
	TenantBurst int
	// PluginQPS and PluginBurst are the bucket every request of the plugin shares, whatever
	// its namespace: what the plugin may send in all (a cloud account's quota).
	PluginQPS   float64
	PluginBurst int
	// MaxWait is how long a request may wait for a token of the plugin's bucket before it
	// fails, unless its namespace has fewer than its share of the requests waiting there
	// (see TenantLimiter); DefaultMaxWait when 0 or less.
	MaxWait time.Duration
	// MaxBuckets bounds the tenant buckets kept, the least recently used going first (it
	// comes back full); DefaultMaxBuckets when 0 or less.
	MaxBuckets int
}

// TenantLimiter limits the HTTP requests of a plugin, which serves every namespace, so that
// one namespace's retry storm neither floods its endpoint nor takes the share of the
// others: each (namespace, host) has its own token bucket (TenantFrom of the request's
// context; requests made outside any hook share one bucket of their own), and every
// request also takes a token of the plugin's bucket. A request whose tenant's bucket is
// empty fails at once, with a retryable RateLimited error: the hook is retried with
// backoff, rather than holding the engine's worker.
//
// The plugin's bucket lets PluginQPS × MaxWait requests wait (at least one), shared
// between the namespaces with requests waiting as the engine shares its workers
// (pkg/fairqueue): while n namespaces have requests waiting, each may have its share,
// that number divided by n (rounded up, at least one). A request that would wait longer
// than MaxWait fails as above when its namespace has its share waiting already, and
// waits otherwise, failing at once only when its token would come after its context's
// deadline. So a namespace whose hooks hold every worker but one (--workers 11 and more
// with the plugins' limits) fails fast beyond its share, and another namespace's request
// is delayed, not refused: how many wait follows the engine's workers, not a fixed
// bound. Share one TenantLimiter among all the executors of a plugin.
type TenantLimiter struct {
	limits TenantLimits
	plugin *rate.Limiter
	// pool is how many requests may wait for the plugin's bucket, shared by the
	// namespaces waiting: PluginQPS × MaxWait, at least 1.
	pool int
	// mu makes finding a bucket, or adding it, one step, and a reservation of the
	// plugin's bucket and the count of the requests waiting for it another.
	mu sync.Mutex
	// buckets holds a *rate.Limiter by bucketKey.
	buckets *lru.Cache
	// waiting counts the requests waiting for a token of the plugin's bucket, by
	// namespace ("" outside any hook); a namespace with none is not kept.
	waiting map[string]int
}

// bucketKey names the bucket of a request: its tenant ("" outside any hook) and host.
type bucketKey struct {
	namespace string
	host      string
}

// NewTenantLimiter is a TenantLimiter with the given limits.
func NewTenantLimiter(limits TenantLimits) *TenantLimiter {
	if limits.MaxWait <= 0 {
		limits.MaxWait = DefaultMaxWait
	}
	if limits.MaxBuckets <= 0 {
		limits.MaxBuckets = DefaultMaxBuckets
	}
	return &TenantLimiter{
		limits:  limits,
		plugin:  rate.NewLimiter(rate.Limit(limits.PluginQPS), limits.PluginBurst),
		pool:    max(1, int(limits.PluginQPS*limits.MaxWait.Seconds())),
		buckets: lru.New(limits.MaxBuckets),
		waiting: map[string]int{},
	}
}

// Transport wraps base (http.DefaultTransport when nil) so that every request it sends
// takes a token of l first, or fails.
func (l *TenantLimiter) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &tenantLimitedTransport{base: base, limiter: l}
}

type tenantLimitedTransport struct {
	base    http.RoundTripper
	limiter *TenantLimiter
}

func (t *tenantLimitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.limiter.take(req.Context(), strings.ToLower(req.URL.Host)); err != nil {
		// A RoundTripper closes the request's body, even when it sends nothing.
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	return t.base.RoundTrip(req)
}

// take takes a token of the bucket of ctx's tenant and host, then one of the plugin's,
// waiting no longer than MaxWait for it unless the tenant has fewer than its share of the
// requests waiting (and never past ctx's deadline), or says why not.
func (l *TenantLimiter) take(ctx context.Context, host string) error {
	namespace, inHook := TenantFrom(ctx)
	who := fmt.Sprintf("namespace %q", namespace)
	if !inHook {
		who = "requests made outside any hook"
	}
	now := time.Now()
	own := l.bucket(bucketKey{namespace: namespace, host: host}).ReserveN(now, 1)
	if !own.OK() || own.DelayFrom(now) > 0 {
		own.CancelAt(now)
		return Retryable(reasonRateLimited, fmt.Errorf(
			"client-side rate limit: %s reached its limit of requests to %s, %g requests a second in bursts of %d for each namespace and host",
			who, host, l.limits.TenantQPS, l.limits.TenantBurst))
	}
	shared, wait, refused := l.reserveShared(ctx, namespace, now)
	if refused != nil {
		// Neither bucket keeps a token for a request that is not sent.
		own.CancelAt(now)
		why := ""
		switch {
		case refused.share > 0:
			why = fmt.Sprintf(", and %s has %d of its requests waiting for it already, its share while %d namespaces wait", who, refused.share, refused.namespaces)
		case refused.deadline:
			why = ", nor before the request's deadline"
		}
		return Retryable(reasonRateLimited, fmt.Errorf(
			"client-side rate limit: the plugin, which every namespace shares, reached its limit of %g requests a second in bursts of %d, with no request free within %s%s",
			l.limits.PluginQPS, l.limits.PluginBurst, l.limits.MaxWait, why))
	}
	if wait == 0 {
		return nil
	}
	defer l.doneWaiting(namespace)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		shared.Cancel()
		own.Cancel()
		return fmt.Errorf("wait for the plugin's client-side rate limit: %w", ctx.Err())
	}
}

// refusal is why a request may not wait for the plugin's bucket: its namespace has share
// requests waiting already, its share while namespaces wait (share 0: not that), or its
// token comes after its deadline; or neither, when the bucket never gives a token.
type refusal struct {
	share, namespaces int
	deadline          bool
}

// reserveShared reserves a token of the plugin's bucket for a request of namespace at
// now, and says how long the request waits for it: a wait is counted among namespace's
// requests waiting until doneWaiting. A wait over MaxWait is allowed only while namespace
// has fewer requests waiting than its share (the pool divided between the namespaces
// waiting, it among them, rounded up, at least one; as pkg/fairqueue shares workers),
// and only when the token comes before ctx's deadline; otherwise nothing is reserved.
func (l *TenantLimiter) reserveShared(ctx context.Context, namespace string, now time.Time) (*rate.Reservation, time.Duration, *refusal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	shared := l.plugin.ReserveN(now, 1)
	if !shared.OK() {
		return nil, 0, &refusal{}
	}
	wait := shared.DelayFrom(now)
	if wait > l.limits.MaxWait {
		held := l.waiting[namespace]
		namespaces := len(l.waiting)
		if held == 0 {
			namespaces++ // namespace's request would wait too
		}
		share := max(1, (l.pool+namespaces-1)/namespaces)
		var refused *refusal
		if held >= share {
			refused = &refusal{share: share, namespaces: namespaces}
		} else if deadline, ok := ctx.Deadline(); ok && now.Add(wait).After(deadline) {
			refused = &refusal{deadline: true}
		}
		if refused != nil {
			shared.CancelAt(now)
			return nil, 0, refused
		}
	}
	if wait > 0 {
		l.waiting[namespace]++
	}
	return shared, wait, nil
}

// doneWaiting counts a request of namespace that waited for the plugin's bucket as no
// longer waiting.
func (l *TenantLimiter) doneWaiting(namespace string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiting[namespace]--; l.waiting[namespace] <= 0 {
		delete(l.waiting, namespace)
	}
}

// bucket is the bucket of key, made full when it is not kept.
func (l *TenantLimiter) bucket(key bucketKey) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.buckets.Get(key); ok {
		return b.(*rate.Limiter)
	}
	b := rate.NewLimiter(rate.Limit(l.limits.TenantQPS), l.limits.TenantBurst)
	l.buckets.Add(key, b)
	return b
}
