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

// Write logs each line: warnings and errors at the default level, the rest at V(2)
// (go-plugin's own debug chatter) or V(1) (the plugin's info lines).
func (w klogWriter) Write(b []byte) (int, error) {
	for line := range strings.SplitSeq(strings.TrimRight(string(b), "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "[ERROR]"), strings.HasPrefix(line, "[WARN]"):
			w.logger.Info(line)
		case strings.HasPrefix(line, "[DEBUG]"), strings.HasPrefix(line, "[TRACE]"):
			w.logger.V(2).Info(line)
		default:
			w.logger.V(1).Info(line)
		}
	}
	return len(b), nil
}
