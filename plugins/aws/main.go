// Command stepwise-plugin-aws serves the executor aws.terminate-instance, which terminates
// the EC2 instance behind a retired node. It talks to the EC2 API (or an EC2-compatible
// private cloud, parameter endpoint) through aws-sdk-go-v2 with the access key of a Secret
// the operator reads as the pipeline's service account (parameter credentialsSecret). See
// README.md.
package main

import (
	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

// The client-side limits on the requests this plugin makes to EC2. EC2 throttles per
// account and region, so a retry storm across many pipelines must not exhaust the quota
// other tools of the account rely on: the plugin's bucket bounds what all its pipelines
// send. One plugin process serves every namespace: the pipelines of one namespace have a
// bucket of their own for each endpoint, at half the plugin's rate, so that their retry
// storm fails fast against it rather than take every other namespace's share. A
// termination costs two requests, and one a look while the instance shuts down.
var limits = sdk.TenantLimits{PluginQPS: 10, PluginBurst: 20, TenantQPS: 5, TenantBurst: 10}

func main() {
	// The addresses EC2 may be at: every public one, and the ranges the operator's
	// --plugin-allowed-cidrs allows (an EC2-compatible private cloud, a VPC endpoint). A
	// plugin never runs with another policy than asked.
	egress.Serve("stepwise-plugin-aws", limits, newTerminateInstance)
}
