package host

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestVerbosityOfPluginLines(t *testing.T) {
	tests := []struct {
		line string
		want int
	}{
		{line: "[DEBUG] plugin.stepwise-plugin-example: probing https://example.com", want: 0},
		{line: "[INFO]  plugin.stepwise-plugin-example: sent: pipeline=ns/p step=notify", want: 0},
		{line: "[TRACE] plugin.stepwise-plugin-example: detail", want: 2},
		{line: "[WARN]  plugin.stepwise-plugin-example: slow", want: 0},
		{line: "[ERROR] plugin.stepwise-plugin-example: panic: boom", want: 0},
		{line: "[DEBUG] plugin: starting plugin: path=/tmp/x", want: 2},
		{line: "[INFO]  plugin: plugin process exited", want: 1},
		{line: "[WARN]  plugin: plugin failed to exit gracefully", want: 0},
		{line: "no level at all", want: 1},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, verbosity(tt.line), tt.line)
	}
}
