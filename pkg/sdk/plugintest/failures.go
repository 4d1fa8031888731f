package plugintest

import (
	"fmt"
	"testing"
)

// Failures runs f against a testing.TB that records the failures f reports with Errorf
// instead of failing t, and returns them: how a test checks that a check fails (that
// CrashReplay catches an API that ignores the idempotency key, say).
func Failures(t testing.TB, f func(tb testing.TB)) []string {
	rec := &recordingTB{TB: t}
	f(rec)
	return rec.errors
}

// recordingTB records the failures reported with Errorf instead of failing the test.
type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Failed() bool { return len(r.errors) > 0 }
