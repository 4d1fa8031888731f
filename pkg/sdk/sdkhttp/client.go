package sdkhttp

import (
	"net/http"

	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
	"github.com/stepwise-dev/stepwise/pkg/tracing"
)

// Client is an HTTP client for the endpoints a step names: it connects only where the
// operator's egress policy allows (egress.FromEnvironment: public addresses and the ranges
// of --plugin-allowed-cidrs), through no proxy, reads at most egress.MaxResponseBytes of an
// answer (after decompression), and follows no redirect (Result maps a 3xx
// to a permanent Redirected error). A request is bounded by its context: the hook's
// deadline. The operator checks --plugin-allowed-cidrs when it starts; should the variable
// not parse, the client allows public addresses only, the narrower policy.
func Client() *http.Client {
	policy, err := egress.FromEnvironment()
	if err != nil {
		policy = egress.New()
	}
	return ClientFor(policy)
}

// ClientFor is Client with the given policy rather than the environment's: the operator's
// own queries (a trigger's health gates) under its own flag.
//
// A request made with a hook's context continues its trace when the operator traces: a
// client span naming the method and host only, and the traceparent header, so that the
// endpoint can join the pipeline's trace (tracing.Transport). Without a span it adds
// nothing.
func ClientFor(policy *egress.Policy) *http.Client {
	return &http.Client{
		Transport:     tracing.Transport(egress.LimitResponses(policy.Transport(nil), egress.MaxResponseBytes)),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
