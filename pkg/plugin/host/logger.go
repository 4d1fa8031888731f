package host

import (
	"io"
	"strings"

	"github.com/hashicorp/go-hclog"
	"k8s.io/klog/v2"
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
// wrote to its stderr, which go-plugin logs through a logger named after the executable
// ("plugin.stepwise-plugin-x: ..."), plain lines at DEBUG and sdk.Logger's at their level,
// is shown at the default level: an author's fmt.Fprintln(os.Stderr, ...) in a hook must
// not be lost. go-plugin's own chatter ("plugin: ...") is at V(2) for DEBUG and TRACE, V(1)
// for INFO; warnings and errors of either always show.
func verbosity(line string) int {
	level, rest, ok := strings.Cut(line, "]")
	if !ok {
		return 1
	}
	fromPlugin := strings.HasPrefix(strings.TrimLeft(rest, " "), "plugin.")
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
