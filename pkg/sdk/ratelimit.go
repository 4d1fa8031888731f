package sdk

import (
	"fmt"
	"net/http"

	"golang.org/x/time/rate"
)

// RateLimitedTransport limits the HTTP requests a plugin makes to its cloud API, so that a
// retry storm across many pipelines cannot exhaust the cloud's API quota. Requests wait for
// a token (or their context); base nil means http.DefaultTransport. Share one transport
// (or one limiter) among all the executors of a plugin: the quota is per account, not per
// executor.
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
		return nil, Retryable("RateLimited", fmt.Errorf("client-side rate limit of the cloud API: %w", err))
	}
	return t.base.RoundTrip(req)
}
