// Command stepwise-plugin-openstack serves the executor openstack.terminate-server, which
// deletes the Nova server behind a retired node. It talks to Keystone v3 and Nova through
// gophercloud with the credentials of a Secret the operator reads as the pipeline's service
// account (parameter credentialsSecret). See README.md.
package main

import (
	"fmt"
	"net/http"
	"os"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

// The client-side limit on the requests this plugin makes to OpenStack, shared by every
// pipeline the plugin process serves: a retry storm across many pipelines must not exhaust
// the cloud's API rate limits, which are per account, not per pipeline.
const (
	apiQPS   = 10
	apiBurst = 20
)

func main() {
	// The addresses Keystone and Nova may be at: every public one, and the ranges the
	// operator's --plugin-allowed-cidrs allows (a private cloud's network). A plugin never
	// runs with another policy than asked.
	policy, err := egress.FromEnvironment()
	if err != nil {
		fmt.Fprintf(os.Stderr, "stepwise-plugin-openstack: %v\n", err)
		os.Exit(1)
	}
	limiter := sdk.NewLimiter(apiQPS, apiBurst)
	sdk.Serve(newTerminateServer(policy, func(rt http.RoundTripper) http.RoundTripper { return sdk.RateLimitedTransport(rt, limiter) }))
}
