package plugintest

// The checks of an executor's parameter declarations, for plugins and built-in executors
// alike: the engine checks every step's parameters against them (contract.CheckParams)
// before any hook, so they must be complete and true.

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// AssertDeclarations checks that every parameter d declares has a type (so the engine refuses
// the parameters it does not declare), that enums have values and defaults are valid,
// that the parameters naming a Secret, and only they, are secrets, and that full, a valid
// value of every parameter the executor reads, is exactly what d declares: the engine
// takes it, and refuses it with a misspelt name added.
func AssertDeclarations(t *testing.T, d contract.Description, full map[string]string) {
	t.Helper()
	var names []string
	for _, p := range d.Parameters {
		names = append(names, p.Name)
		assert.NotEmpty(t, p.Type, "parameter %q has no type", p.Name)
		assert.NotEmpty(t, p.Description, "parameter %q has no description", p.Name)
		assert.Equal(t, strings.HasSuffix(p.Name, contract.SecretSuffix), p.Type == contract.ParamSecret,
			"parameter %q: a parameter naming a Secret, and only it, is of type secret", p.Name)
		if p.Type == contract.ParamEnum {
			assert.NotEmpty(t, p.Values, "enum parameter %q has no values", p.Name)
		} else {
			assert.Empty(t, p.Values, "parameter %q is no enum", p.Name)
		}
		assert.False(t, p.Required && p.Default != "", "required parameter %q has a default", p.Name)
	}
	assert.ElementsMatch(t, names, slices.Collect(maps.Keys(full)), "the full set names every declared parameter, and only those")

	got, err := contract.CheckParams(d.Parameters, full)
	require.NoError(t, err, "a valid value of every parameter")
	assert.Equal(t, full, got, "nothing is added to a full set")

	// The defaults are valid values, filled in for a step that sets only what is required.
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
	typo["tiemout"] = "5m"
	AssertRefused(t, d, typo, `parameter "tiemout" is not a parameter of the executor`)
}

// Checked returns params as the engine hands them to a hook of the executor d describes:
// checked against its declarations, with the defaults of those not set. The test fails if
// the engine would refuse them.
func Checked(t testing.TB, d contract.Description, params map[string]string) map[string]string {
	t.Helper()
	out, err := contract.CheckParams(d.Parameters, params)
	require.NoError(t, err)
	return out
}

// AssertRefused checks that the engine refuses params before any hook of the executor d
// describes, with a permanent InvalidParameter whose message holds want.
func AssertRefused(t *testing.T, d contract.Description, params map[string]string, want string) {
	t.Helper()
	_, err := contract.CheckParams(d.Parameters, params)
	require.Error(t, err, "%v", params)
	assert.True(t, contract.IsPermanent(err), "%v", err)
	assert.Equal(t, contract.ReasonInvalidParameter, contract.OwnReason(err), "%v", err)
	assert.Contains(t, err.Error(), want)
}

// Refusal is a case of a test of refused parameters: Params are refused (by the engine,
// for AssertRefusals, or by a hook's own checks) with Want in the message.
type Refusal struct {
	Name   string
	Params map[string]string
	Want   string
}

// AssertRefusals checks each case, in a subtest of its name, with AssertRefused.
func AssertRefusals(t *testing.T, d contract.Description, cases []Refusal) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) { AssertRefused(t, d, c.Params, c.Want) })
	}
}
