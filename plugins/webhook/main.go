// Command stepwise-plugin-webhook serves the executor webhook.call, which POSTs a signed
// JSON description of a hook to a URL: the way to plug a bespoke private cloud (or any
// in-house automation) into a pipeline without writing a plugin. See README.md.
package main

import (
	"fmt"
	"net/http"
	"os"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

// The client-side limit on the requests this plugin makes, shared by every pipeline the
// plugin process serves: a retry storm across many pipelines must not flood the receivers.
const (
	apiQPS   = 10
	apiBurst = 20
)

func main() {
	// The addresses calls may connect to: every public one, and the ranges the operator's
	// --plugin-allowed-cidrs allows. A plugin never runs with another policy than asked.
	policy, err := egress.FromEnvironment()
	if err != nil {
		fmt.Fprintf(os.Stderr, "stepwise-plugin-webhook: %v\n", err)
		os.Exit(1)
	}
	limiter := sdk.NewLimiter(apiQPS, apiBurst)
	sdk.Serve(newCall(policy, func(rt http.RoundTripper) http.RoundTripper { return sdk.RateLimitedTransport(rt, limiter) }))
}
