package plugintest

import (
	"strings"
	"sync"
	"testing"

	"github.com/stepwise-dev/stepwise/pkg/plugin/client"
)

// testLog is an io.Writer of log lines into a test's log, which `go test` shows when the
// test fails or with -v. Lines written once the test is over (a plugin's goroutine still
// running) are dropped: logging then would panic.
type testLog struct {
	mu     sync.Mutex
	t      testing.TB
	closed bool
}

// newTestLog is the test's log, closed when the test's cleanups have run (registered
// first, it runs last).
func newTestLog(t testing.TB) *testLog {
	l := &testLog{t: t}
	t.Cleanup(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.closed = true
	})
	return l
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		for line := range strings.SplitSeq(strings.TrimRight(string(p), "\n"), "\n") {
			l.t.Log(readable(line))
		}
	}
	return len(p), nil
}

// readable is a log line as a person reads it: an hclog JSON line as client.LogLine
// shows it, any other line as it is.
func readable(line string) string {
	if entry, ok := client.ParseLogLine([]byte(line)); ok {
		return entry.String()
	}
	return line
}
