package plugintest

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"testing"
)

// logWatch passes what a plugin logs, and what it writes to its standard error, on to the
// test's log, and keeps every Secret form it showed: in a real plugin both reach the
// operator's log, which no Secret value may.
type logWatch struct {
	next  io.Writer
	leaks leakFinder

	mu    sync.Mutex
	found []string
}

// Write passes p on with every Secret form in it masked (a failing test's log must not
// print the value either), and keeps what it masked.
func (w *logWatch) Write(p []byte) (int, error) {
	text := string(p)
	if what, ok := w.leaks.inText(text); ok {
		w.mu.Lock()
		if !slices.Contains(w.found, what) {
			w.found = append(w.found, what)
		}
		w.mu.Unlock()
		text = w.leaks.mask(text)
	}
	if _, err := io.WriteString(w.next, text); err != nil {
		return 0, err
	}
	return len(p), nil
}

// findings are the Secret forms seen so far, each once.
func (w *logWatch) findings() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.found...)
}

// captureStderr points os.Stderr at w, through a pipe, until the returned function (or,
// if the test ends first, a cleanup) puts it back and waits for what was written. The
// executor runs in the test's process: what its hooks write to os.Stderr, which a plugin
// process's standard error would carry to the operator's log, is checked too. Writes to
// file descriptor 2 that bypass os.Stderr are not seen.
func (w *logWatch) captureStderr(t testing.TB) func() {
	t.Helper()
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatalf("a pipe for the plugin's standard error: %v", err)
	}
	orig := os.Stderr
	os.Stderr = pw
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		if _, err := io.Copy(w, r); err != nil {
			_, _ = fmt.Fprintf(orig, "plugintest: reading the plugin's standard error: %v\n", err)
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			os.Stderr = orig
			_ = pw.Close()
			<-copied
			_ = r.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}
