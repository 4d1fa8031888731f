package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

func TestGreet(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]string
		want   string
	}{
		{"the default salutation", map[string]string{"name": "Ada"}, "Hello, Ada!"},
		{"a salutation", map[string]string{"name": "Ada", "salutation": "Good morning"}, "Good morning, Ada!"},
	}
	c := plugintest.Serve(t, greet{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := c.Run(context.Background(), "example.greet", sdk.HookCreate, plugintest.Request(sdk.HookCreate, "u1", tt.params))
			require.NoError(t, err)
			assert.True(t, res.Done)
			assert.Equal(t, map[string]string{"greeting": tt.want}, res.Outputs)
		})
	}
}

// TestParametersTheSDKRefuses: the SDK checks the declarations before any hook, as the
// engine does, so Create never sees a step without a name, nor a parameter greet does not
// take.
func TestParametersTheSDKRefuses(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]string
		want   string
	}{
		{"no name", nil, `parameter "name" is required`},
		{"a misspelt parameter", map[string]string{"name": "Ada", "salutaton": "Hi"}, `parameter "salutaton" is not a parameter of the executor, which takes name, salutation`},
	}
	c := plugintest.Serve(t, greet{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Run(context.Background(), "example.greet", sdk.HookCreate, plugintest.Request(sdk.HookCreate, "u1", tt.params))
			var e *sdk.Error
			require.ErrorAs(t, err, &e)
			assert.True(t, e.Permanent)
			assert.Equal(t, sdk.ReasonInvalidParameter, e.Reason)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestDescribe: every parameter has a type, so the declarations are complete.
func TestDescribe(t *testing.T) {
	infos, err := plugintest.Serve(t, greet{}).Describe(context.Background())
	require.NoError(t, err)
	require.Len(t, infos, 1)
	types := map[string]string{}
	for _, p := range infos[0].GetParameters() {
		types[p.GetName()] = p.GetType()
	}
	assert.Equal(t, map[string]string{"name": "string", "salutation": "string"}, types)
}

func TestConformance(t *testing.T) {
	plugintest.Conformance(t, greet{}, map[string]string{"name": "Ada"})
}
