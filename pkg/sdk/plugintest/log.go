package plugintest

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
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

// readable is an hclog JSON line as a person reads it: [INFO] message key=value ...
func readable(line string) string {
	var fields map[string]any
	if json.Unmarshal([]byte(line), &fields) != nil {
		return line
	}
	msg, ok := fields["@message"].(string)
	if !ok {
		return line
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] ", strings.ToUpper(fmt.Sprint(fields["@level"])))
	if module, ok := fields["@module"].(string); ok {
		b.WriteString(module + ": ")
	}
	b.WriteString(msg)
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !strings.HasPrefix(k, "@") {
			fmt.Fprintf(&b, " %s=%v", k, fields[k])
		}
	}
	return b.String()
}
