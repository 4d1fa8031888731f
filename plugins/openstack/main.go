// Command stepwise-plugin-openstack serves the executor openstack.terminate-server, which
// deletes the Nova server behind a retired node. It talks to Keystone v3 and Nova through
// gophercloud with the credentials of a Secret the operator reads as the pipeline's service
// account (parameter credentialsSecret). See README.md.
package main

import (
	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// The client-side limit on the requests this plugin makes to OpenStack, shared by every
// pipeline the plugin process serves: a retry storm across many pipelines must not exhaust
// the cloud's API rate limits, which are per account, not per pipeline.
const (
	apiQPS   = 10
	apiBurst = 20
)

func main() {
	sdk.Serve(newTerminateServer(sdk.RateLimitedTransport(nil, sdk.NewLimiter(apiQPS, apiBurst))))
}
