package host

import (
	"io"
	"strings"

	"github.com/hashicorp/go-hclog"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/plugin/client"
)

// newLogger is go-plugin's logger for one plugin: hclog writing each line through klog,
// tagged with the plugin (the logger carries "plugin" and "path").
func newLogger(logger klog.Logger) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:            "plugin",
		Level:           hclog.Debug,
		Output:          klogWriter{logger: logger},
		DisableTime:     true,
		Color:           hclog.ColorOff,
		IncludeLocation: false,
	})
}

type klogWriter struct{ logger klog.Logger }

var _ io.Writer = klogWriter{}

// Write logs each line at its verbosity.
func (w klogWriter) Write(b []byte) (int, error) {
	for line := range strings.SplitSeq(strings.TrimRight(string(b), "\n"), "\n") {
		w.logger.V(verbosity(line)).Info(line)
	}
	return len(b), nil
}

// verbosity is the klog level of a line of go-plugin's logger. What the plugin itself
// wrote to its stderr before serving, which go-plugin logs through a logger named after
// the executable ("plugin.stepwise-plugin-x: ..."), plain lines at DEBUG and sdk.Logger's
// at their level, is shown at the default level (the SDK keeps go-plugin's own chatter in
// the plugin at INFO and above). go-plugin's host-side chatter ("plugin: ...",
// "plugin.stdio: ...") is at V(2) for DEBUG and TRACE, V(1) for INFO; warnings and errors
// of either always show.
func verbosity(line string) int {
	level, rest, ok := strings.Cut(line, "]")
	if !ok {
		return 1
	}
	fromPlugin := strings.HasPrefix(strings.TrimLeft(rest, " "), "plugin."+Prefix)
	switch level {
	case "[ERROR", "[WARN":
		return 0
	case "[TRACE":
		return 2
	}
	if fromPlugin {
		return 0
	}
	if level == "[DEBUG" {
		return 2
	}
	return 1
}

// newLineLogger logs each line a plugin writes to one of its standard streams at the
// default level, tagged with the plugin and the stream.
func newLineLogger(logger klog.Logger, stream string) *client.LineWriter {
	return client.NewLineWriter(func(line []byte, _ bool) {
		if text := strings.TrimRight(string(line), "\r"); text != "" {
			logger.Info("Plugin output", "stream", stream, "line", text)
		}
	})
}
