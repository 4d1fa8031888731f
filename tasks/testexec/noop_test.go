package testexec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// TestNoopTakesAnyParameter: test.noop declares none, so the engine checks nothing.
func TestNoopTakesAnyParameter(t *testing.T) {
	params := map[string]string{"anything": "at all"}
	got, err := contract.CheckParams(Noop{}.Describe().Parameters, params)
	require.NoError(t, err)
	assert.Equal(t, params, got)
}
