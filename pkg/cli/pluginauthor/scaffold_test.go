package pluginauthor

import (
	"go/format"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRenderPlugin(t *testing.T) {
	files, err := renderPlugin("acme")
	require.NoError(t, err)
	require.Len(t, files, 2)
	for _, f := range files {
		formatted, err := format.Source(f.data)
		require.NoError(t, err)
		assert.Equal(t, string(formatted), string(f.data), "%s is gofmt'ed", f.name)
	}
	assert.Contains(t, string(files[0].data), `func (hello) Name() string { return "acme.hello" }`)
	assert.Contains(t, string(files[0].data), "// Command stepwise-plugin-acme ")
}
