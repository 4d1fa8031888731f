package host

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/textlogger"
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
		{line: "[DEBUG] plugin.stdio: received EOF, stopping recv loop", want: 2},
		{line: "[INFO]  plugin: plugin process exited", want: 1},
		{line: "[WARN]  plugin: plugin failed to exit gracefully", want: 0},
		{line: "no level at all", want: 1},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, verbosity(tt.line), tt.line)
	}
}

func TestLineLoggerLogsWholeLines(t *testing.T) {
	var buf bytes.Buffer
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf)))
	w := newLineLogger(logger, "stderr")
	for _, chunk := range []string{"first li", "ne\nsecond line\n\nthird", " line\n"} {
		n, err := w.Write([]byte(chunk))
		require.NoError(t, err)
		assert.Equal(t, len(chunk), n)
	}
	out := buf.String()
	assert.Equal(t, 3, strings.Count(out, `"Plugin output"`), out)
	for _, line := range []string{`line="first line"`, `line="second line"`, `line="third line"`} {
		assert.Contains(t, out, line)
	}
	assert.Contains(t, out, `stream="stderr"`)
}
