package pluginauthor

import (
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
	"github.com/stepwise-dev/stepwise/pkg/plugin/client"
)

// pluginLog writes what a plugin process prints to the CLI's standard error, a line at a
// time, each prefixed with the plugin's name and escaped: a plugin's output must not drive
// the terminal. Lines of its original standard error that are hclog JSON (sdk.Logger's,
// go-plugin's) are shown as client.LogLine reads them, from the given level up. It drops
// what comes after close: go-plugin's goroutine copying the plugin's output can outlive
// Kill.
type pluginLog struct {
	mu      sync.Mutex
	w       io.Writer
	prefix  string
	level   hclog.Level
	closed  bool
	sources []*client.LineWriter
}

func newPluginLog(w io.Writer, prefix string, level hclog.Level) *pluginLog {
	return &pluginLog{w: w, prefix: prefix, level: level}
}

// source is a writer of one stream of the plugin's output; parse says its lines may be
// hclog JSON (a line cut for its length is shown as it is).
func (l *pluginLog) source(parse bool) io.Writer {
	s := client.NewLineWriter(func(line []byte, cut bool) { l.writeLine(line, parse && !cut) })
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sources = append(l.sources, s)
	return s
}

// close writes what is left of unfinished lines and drops what comes later.
func (l *pluginLog) close() {
	l.mu.Lock()
	sources := slices.Clone(l.sources)
	l.mu.Unlock()
	for _, s := range sources {
		s.Flush()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
}

// writeLine writes one line, unless it is a log line below l's level or l is closed.
func (l *pluginLog) writeLine(line []byte, parse bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	text := string(line)
	if parse {
		if entry, ok := client.ParseLogLine(line); ok {
			if l.level == hclog.Off || entry.Level < l.level {
				return
			}
			text = entry.String()
		}
	}
	_, _ = io.WriteString(l.w, l.prefix+termsafe.EscapeLine(strings.TrimSuffix(text, "\r"))+"\n")
}
