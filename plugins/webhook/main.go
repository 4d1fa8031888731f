// Command stepwise-plugin-webhook serves the executor webhook.call, which POSTs a signed
// JSON description of a hook to a URL: the way to plug a bespoke private cloud (or any
// in-house automation) into a pipeline without writing a plugin. See README.md.
package main

import (
	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

// The client-side limits on the requests this plugin makes. The plugin's bucket bounds
// what all its pipelines send, so that a retry storm cannot flood the receivers. One
// plugin process serves every namespace: the pipelines of one namespace have a bucket of
// their own for each receiver, at half the plugin's rate, so that their retry storm fails
// fast against it rather than take every other namespace's share. A hook calls once.
var limits = sdk.TenantLimits{PluginQPS: 10, PluginBurst: 20, TenantQPS: 5, TenantBurst: 10}

func main() {
	// The addresses calls may connect to: every public one, and the ranges the operator's
	// --plugin-allowed-cidrs allows. A plugin never runs with another policy than asked.
	egress.Serve("stepwise-plugin-webhook", limits, newCall)
}
