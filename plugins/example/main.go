// Command stepwise-plugin-example is the plugin to copy: one executor, example.greet,
// that writes the output "greeting" from the parameter "name". Build it into the
// operator's --plugin-dir (make plugins) and list its SHA-256 in the checksum file.
package main

import (
	"context"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// greet is an executor: sdk.Base answers the hooks it does not implement.
type greet struct{ sdk.Base }

func (greet) Name() string { return "example.greet" }

// Describe declares every parameter with its type: before any hook the engine refuses a
// step whose parameters do not fit (a missing name, a parameter not declared here) and
// fills in the defaults.
func (greet) Describe() sdk.Description {
	return sdk.Description{
		Version:     "v0.1.0",
		Description: "Writes the output greeting from the parameter name.",
		Parameters: []sdk.Parameter{
			{Name: "name", Type: sdk.ParamString, Required: true, Description: "Who to greet."},
			{Name: "salutation", Type: sdk.ParamString, Default: "Hello", Description: "How to greet."},
		},
	}
}

// Create is idempotent, as every hook must be: it may run more than once. It reads the
// checked parameters with the request's accessors.
func (greet) Create(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	name := req.String("name")
	greeting := req.String("salutation") + ", " + name + "!"
	return sdk.DoneWithOutputs("greeted "+name, map[string]string{"greeting": greeting}), nil
}

func main() { sdk.Serve(greet{}) }
