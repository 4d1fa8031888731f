// Command stepwise-plugin-example is the plugin to copy: one executor, example.greet,
// that writes the output "greeting" from the parameter "name". Build it into the
// operator's --plugin-dir (make plugins) and list its SHA-256 in the checksum file.
package main

import (
	"context"
	"errors"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// greet is an executor: sdk.Base answers the hooks it does not implement.
type greet struct{ sdk.Base }

func (greet) Name() string { return "example.greet" }

func (greet) Describe() sdk.Description {
	return sdk.Description{
		Version:     "v0.1.0",
		Description: "Writes the output greeting from the parameter name.",
		Parameters:  []sdk.Parameter{{Name: "name", Description: "Who to greet.", Required: true}},
	}
}

// Create is idempotent, as every hook must be: it may run more than once.
func (greet) Create(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	name := req.Params["name"]
	if name == "" {
		// Permanent: retrying cannot help, the step fails at once.
		return sdk.Result{}, sdk.Permanent("InvalidParameter", errors.New("parameter name is required"))
	}
	return sdk.DoneWithOutputs("greeted "+name, map[string]string{"greeting": "Hello, " + name + "!"}), nil
}

func main() { sdk.Serve(greet{}) }
