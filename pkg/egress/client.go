package egress

import (
	"net/http"

	"github.com/stepwise-dev/stepwise/pkg/tracing"
)

// Client is an HTTP client for the endpoints a tenant names, under policy: it connects only
// where the policy allows, through no proxy, reads at most MaxResponseBytes of an answer
// (after decompression), and follows no redirect (the caller sees the 3xx). A request is
// bounded by its context.
//
// A request made with a traced context continues its trace: a client span naming the
// method and host only, and the traceparent header, so that the endpoint can join the
// pipeline's trace (tracing.Transport). Without a span it adds nothing.
func Client(policy *Policy) *http.Client {
	return &http.Client{
		Transport:     tracing.Transport(LimitResponses(policy.Transport(nil), MaxResponseBytes)),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
