// Command stepwise-plugin-openstack serves the executor openstack.terminate-server, which
// deletes the Nova server behind a retired node. It talks to Keystone v3 and Nova through
// gophercloud with the credentials of a Secret the operator reads as the pipeline's service
// account (parameter credentialsSecret). See README.md.
package main

import (
	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

// The client-side limits on the requests this plugin makes to OpenStack. A retry storm
// across many pipelines must not exhaust the cloud's API rate limits, which are per
// account, not per pipeline: the plugin's bucket bounds what all its pipelines send. One
// plugin process serves every namespace: the pipelines of one namespace have a bucket of
// their own for each endpoint (Keystone, Nova), at half the plugin's rate, so that their
// retry storm fails fast against it rather than take every other namespace's share. A
// termination costs a token, a look-up and a delete.
var limits = sdk.TenantLimits{PluginQPS: 10, PluginBurst: 20, TenantQPS: 5, TenantBurst: 10}

func main() {
	// The addresses Keystone and Nova may be at: every public one, and the ranges the
	// operator's --plugin-allowed-cidrs allows (a private cloud's network). A plugin never
	// runs with another policy than asked.
	egress.Serve("stepwise-plugin-openstack", limits, newTerminateServer)
}
