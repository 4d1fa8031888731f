// Command stepwise-plugin-aws serves the executor aws.terminate-instance, which terminates
// the EC2 instance behind a retired node. It talks to the EC2 API (or an EC2-compatible
// private cloud, parameter endpoint) through aws-sdk-go-v2 with the access key of a Secret
// the operator reads as the pipeline's service account (parameter credentialsSecret). See
// README.md.
package main

import (
	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// The client-side limit on the requests this plugin makes to EC2, shared by every pipeline
// the plugin process serves: EC2 throttles per account and region, so a retry storm across
// many pipelines must not exhaust the quota other tools of the account rely on.
const (
	apiQPS   = 10
	apiBurst = 20
)

func main() {
	sdk.Serve(newTerminateInstance(sdk.RateLimitedTransport(nil, sdk.NewLimiter(apiQPS, apiBurst))))
}
