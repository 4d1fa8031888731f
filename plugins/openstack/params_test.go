package main

import (
	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// withSecret hands req the data of the credentials Secret as the operator does: by the
// parameter that names it, and merged.
func withSecret(req *sdk.Request, data map[string][]byte) *sdk.Request {
	req.Secrets = data
	req.SecretParams = map[string]map[string][]byte{paramCredentialsSecret: data}
	return req
}
