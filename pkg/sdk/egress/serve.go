package egress

import (
	"fmt"
	"net/http"
	"os"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// Serve is the main of a plugin whose executor calls endpoints a tenant names: it serves
// (sdk.Serve) the executor newExecutor makes with the policy the operator hands its
// plugins (FromEnvironment) and the transport wrapper of a sdk.TenantLimiter with limits.
// The addresses it may connect to are every public one and the ranges the operator's
// --plugin-allowed-cidrs allows: a plugin never runs with another policy than asked, so
// a policy that cannot be read ends it, printing "command: error" on standard error.
func Serve[E sdk.Executor](command string, limits sdk.TenantLimits, newExecutor func(*Policy, func(http.RoundTripper) http.RoundTripper) E) {
	policy, err := FromEnvironment()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", command, err)
		os.Exit(1)
	}
	sdk.Serve(newExecutor(policy, sdk.NewTenantLimiter(limits).Transport))
}
