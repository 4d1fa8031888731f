// Command stepwise-plugin-webhook serves the executor webhook.call, which POSTs a signed
// JSON description of a hook to a URL: the way to plug a bespoke private cloud (or any
// in-house automation) into a pipeline without writing a plugin. See README.md.
package main

import (
	"net/http"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// The client-side limit on the requests this plugin makes, shared by every pipeline the
// plugin process serves: a retry storm across many pipelines must not flood the receivers.
const (
	apiQPS   = 10
	apiBurst = 20
)

func main() {
	limiter := sdk.NewLimiter(apiQPS, apiBurst)
	sdk.Serve(newCall(func(rt http.RoundTripper) http.RoundTripper { return sdk.RateLimitedTransport(rt, limiter) }))
}
