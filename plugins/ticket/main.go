// Command stepwise-plugin-ticket serves ticket.approval, a change-ticket gate: Create opens
// a ticket and waits until it is approved, Delete closes it. It is the SDK's example of a
// step's created record (Result.WithCreated, Request.Created). See README.md.
package main

import (
	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/sdkhttp"
)

func main() { sdk.Serve(approval{client: sdkhttp.Client()}) }
