package client

import (
	"bytes"
	"sync"
)

// maxLine bounds a line held while its end has not come: a plugin that never writes a
// newline must not grow the buffer without bound.
const maxLine = 64 << 10

// LineWriter is an io.Writer of a plugin's output (Options.Stdout, Stderr, ProcessStderr)
// that hands each whole line to a function, without its newline: go-plugin copies the
// streams in chunks that need not end at a line's end.
type LineWriter struct {
	// emit gets each line; cut is true for a line over maxLine handed over before its
	// end. The slice is the writer's: emit must not keep it.
	emit func(line []byte, cut bool)

	mu      sync.Mutex
	partial []byte
}

// NewLineWriter is a LineWriter handing lines to emit, one call at a time.
func NewLineWriter(emit func(line []byte, cut bool)) *LineWriter {
	return &LineWriter{emit: emit}
}

// Write hands over every whole line and keeps the rest for the next write.
func (w *LineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.emit(w.partial[:i], false)
		w.partial = w.partial[i+1:]
	}
	if len(w.partial) > maxLine {
		w.emit(w.partial, true)
		w.partial = nil
	}
	// A copy: the rest of a line must not keep a large write's whole buffer alive.
	w.partial = bytes.Clone(w.partial)
	return len(b), nil
}

// Flush hands over what is left of an unfinished line, as a line.
func (w *LineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.partial) > 0 {
		w.emit(w.partial, false)
		w.partial = nil
	}
}
