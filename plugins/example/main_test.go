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
	c := plugintest.Serve(t, greet{})
	ctx := context.Background()

	res, err := c.Run(ctx, "example.greet", sdk.HookCreate, plugintest.Request(sdk.HookCreate, "u1", map[string]string{"name": "Ada"}))
	require.NoError(t, err)
	assert.True(t, res.Done)
	assert.Equal(t, map[string]string{"greeting": "Hello, Ada!"}, res.Outputs)

	_, err = c.Run(ctx, "example.greet", sdk.HookCreate, plugintest.Request(sdk.HookCreate, "u1", nil))
	var e *sdk.Error
	require.ErrorAs(t, err, &e)
	assert.True(t, e.Permanent)
	assert.Equal(t, "InvalidParameter", e.Reason)
}

func TestConformance(t *testing.T) {
	plugintest.Conformance(t, greet{}, map[string]string{"name": "Ada"})
}
