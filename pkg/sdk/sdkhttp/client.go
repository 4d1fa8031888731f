package sdkhttp

import (
	"net/http"

	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
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

// ClientFor is Client with the given policy rather than the environment's (egress.Client).
// A request made with a hook's context continues its trace when the operator traces.
func ClientFor(policy *egress.Policy) *http.Client { return egress.Client(policy) }
