// Command stepwise-plugin-vsphere serves vsphere.terminate-vm, the step of a node
// retirement that shuts down and destroys the node's virtual machine in vCenter. Build it
// into the operator's --plugin-dir (make plugins) and list its SHA-256 in the checksum file.
package main

import (
	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

// The client-side rate limits of the requests this plugin sends to vCenter. vCenter slows
// down for everyone when one client floods it, and a retry storm across many pipelines
// must not do that: the plugin's bucket bounds what all its hooks send. A termination
// costs about a dozen requests (login, look-up, power off, destroy, the task waits,
// logout), so 10 a second with bursts of 20 lets one finish at once and several go on
// together, far under what a vCenter serves. One plugin process serves every namespace:
// the pipelines of one namespace have a bucket of their own for each vCenter, at half the
// plugin's rate, so that their retry storm fails fast against it rather than take every
// other namespace's share; its burst is two terminations (about 15 requests each, the
// task waits included) at once.
var limits = sdk.TenantLimits{PluginQPS: 10, PluginBurst: 20, TenantQPS: 5, TenantBurst: 35}

func main() {
	// The addresses vCenter may be at: every public one, and the ranges the operator's
	// --plugin-allowed-cidrs allows (vCenter is usually on a private network). A plugin
	// never runs with another policy than asked.
	egress.Serve("stepwise-plugin-vsphere", limits, newTerminateVM)
}
