// Command stepwise-plugin-vsphere serves vsphere.terminate-vm, the step of a node
// retirement that shuts down and destroys the node's virtual machine in vCenter. Build it
// into the operator's --plugin-dir (make plugins) and list its SHA-256 in the checksum file.
package main

import (
	"fmt"
	"os"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

// The client-side rate limit of the requests this plugin sends to vCenter, shared by every
// hook of every pipeline the operator runs: vCenter slows down for everyone when one
// client floods it, and a retry storm across many pipelines must not do that. A
// termination costs about a dozen requests (login, look-up, power off, destroy, the task
// waits, logout), so 10 a second with bursts of 20 lets one finish at once and several go
// on together, far under what a vCenter serves.
const (
	apiQPS   = 10
	apiBurst = 20
)

func main() {
	// The addresses vCenter may be at: every public one, and the ranges the operator's
	// --plugin-allowed-cidrs allows (vCenter is usually on a private network). A plugin
	// never runs with another policy than asked.
	policy, err := egress.FromEnvironment()
	if err != nil {
		fmt.Fprintf(os.Stderr, "stepwise-plugin-vsphere: %v\n", err)
		os.Exit(1)
	}
	sdk.Serve(newTerminateVM(policy, sdk.NewLimiter(apiQPS, apiBurst)))
}
