package main

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// withSecret hands req the data of the credentials Secret as the operator does: by the
// parameter that names it, and merged.
func withSecret(req *sdk.Request, data map[string][]byte) *sdk.Request {
	req.Secrets = data
	req.SecretParams = map[string]map[string][]byte{paramCredentialsSecret: data}
	return req
}

// assertDeclarationsComplete checks that every parameter d declares has a type (so the
// engine refuses those it does not declare), that the parameters naming a Secret, and only
// they, are secrets, and that full, a valid value of every parameter the executor reads,
// is exactly what d declares: the engine takes it, fills in valid defaults for a set of the
// required ones only, and refuses the full set with a misspelt name.
func assertDeclarationsComplete(t *testing.T, d sdk.Description, full map[string]string) {
	t.Helper()
	var names []string
	for _, p := range d.Parameters {
		names = append(names, p.Name)
		assert.NotEmpty(t, p.Type, "parameter %q has no type", p.Name)
		assert.NotEmpty(t, p.Description, "parameter %q has no description", p.Name)
		assert.Equal(t, strings.HasSuffix(p.Name, contract.SecretSuffix), p.Type == contract.ParamSecret, p.Name)
	}
	assert.ElementsMatch(t, names, slices.Collect(maps.Keys(full)), "the full set names every declared parameter, and only those")
	got, err := contract.CheckParams(d.Parameters, full)
	require.NoError(t, err)
	assert.Equal(t, full, got)

	required := map[string]string{}
	for _, p := range d.Parameters {
		if p.Required {
			required[p.Name] = full[p.Name]
		}
	}
	got, err = contract.CheckParams(d.Parameters, required)
	require.NoError(t, err, "the defaults are valid")
	for _, p := range d.Parameters {
		if p.Default != "" {
			assert.Equal(t, p.Default, got[p.Name], "default of %q", p.Name)
		}
	}

	typo := maps.Clone(full)
	typo["regoin"] = "x"
	_, err = contract.CheckParams(d.Parameters, typo)
	var e *sdk.Error
	require.ErrorAs(t, err, &e)
	assert.True(t, e.Permanent)
	assert.Equal(t, contract.ReasonInvalidParameter, e.Reason)
	assert.Contains(t, err.Error(), `parameter "regoin" is not a parameter of the executor`)
}
