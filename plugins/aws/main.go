// Command stepwise-plugin-aws serves the executor aws.terminate-instance, which terminates
// the EC2 instance behind a retired node. It talks to the EC2 API (or an EC2-compatible
// private cloud, parameter endpoint) through aws-sdk-go-v2 with the access key of a Secret
// the operator reads as the pipeline's service account (parameter credentialsSecret). See
// README.md.
package main

import (
	"fmt"
	"net/http"
	"os"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

// The client-side limit on the requests this plugin makes to EC2, shared by every pipeline
// the plugin process serves: EC2 throttles per account and region, so a retry storm across
// many pipelines must not exhaust the quota other tools of the account rely on.
const (
	apiQPS   = 10
	apiBurst = 20
)

func main() {
	// The addresses EC2 may be at: every public one, and the ranges the operator's
	// --plugin-allowed-cidrs allows (an EC2-compatible private cloud, a VPC endpoint). A
	// plugin never runs with another policy than asked.
	policy, err := egress.FromEnvironment()
	if err != nil {
		fmt.Fprintf(os.Stderr, "stepwise-plugin-aws: %v\n", err)
		os.Exit(1)
	}
	limiter := sdk.NewLimiter(apiQPS, apiBurst)
	sdk.Serve(newTerminateInstance(policy, func(rt http.RoundTripper) http.RoundTripper { return sdk.RateLimitedTransport(rt, limiter) }))
}
