package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// stderr is the process's standard error as it was when the plugin started. go-plugin's
// Serve then points os.Stderr at a pipe whose output the operator discards; the operator
// reads the original one, parses its JSON lines as hclog's, and logs them at their level,
// tagged with the plugin. It is set once, like the standard log package's output.
var stderr io.Writer = os.Stderr

// loggerKey is the context key of a hook's Logger.
type loggerKey struct{}

// Logger is the logger of the hook whose context ctx is: its lines reach the operator's
// log at their level (Debug, Info, Warn, Error), with the attributes pipeline
// (namespace/name), step, executor and hook, and with every Secret value given to the call
// removed from the message and from every string, error and Stringer attribute. Outside a
// hook it returns a logger writing the same lines to the process's standard error, with
// nothing to remove. Never log a Secret on purpose: a value derived from one (a token
// computed from a key) is not removed.
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return newLogger(stderr, Redactor{})
}

// withLogger is ctx carrying the hook's Logger.
func withLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// newHookLogger is the Logger of one call of a hook of the executor named executor.
func newHookLogger(w io.Writer, r Redactor, executor string, req *Request) *slog.Logger {
	return newLogger(w, r).With(
		"pipeline", req.Pipeline.Namespace+"/"+req.Pipeline.Name,
		"step", req.Step,
		"executor", executor,
		"hook", string(req.Hook),
	)
}

// newLogger writes hclog's JSON lines to w ({"@level":"info","@message":"...",
// "@timestamp":"...","key":value}), which go-plugin's host parses, with r's Secret values
// removed. Debug lines are written too: the operator decides what it shows.
func newLogger(w io.Writer, r Redactor) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level:       slog.LevelDebug,
		ReplaceAttr: hclogAttr(r),
	}))
}

// hclogAttr renames slog's built-in attributes to hclog's and redacts every value.
func hclogAttr(r Redactor) func(groups []string, a slog.Attr) slog.Attr {
	return func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 {
			switch {
			case a.Key == slog.TimeKey && a.Value.Kind() == slog.KindTime:
				// The exact layout go-plugin parses: another one makes the line unparsed.
				return slog.String("@timestamp", a.Value.Time().Format(hclog.TimeFormatJSON))
			case a.Key == slog.LevelKey:
				if level, ok := a.Value.Any().(slog.Level); ok {
					return slog.String("@level", hclogLevel(level))
				}
			case a.Key == slog.MessageKey:
				return slog.String("@message", r.String(a.Value.String()))
			}
		}
		if !r.Empty() {
			a.Value = redactValue(r, a.Value)
		}
		return a
	}
}

// hclogLevel is hclog's name of a slog level (none is below Debug: the handler's minimum,
// and the operator's).
func hclogLevel(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	default:
		return "error"
	}
}

// redactValue is v without Secret values: strings, errors, Stringers and byte slices as
// text, other values as the JSON the handler would write (then written as a string when
// something was removed).
func redactValue(r Redactor, v slog.Value) slog.Value {
	switch v.Kind() {
	case slog.KindString:
		return slog.StringValue(r.String(v.String()))
	case slog.KindAny:
	default:
		return v // numbers, booleans, durations, times
	}
	switch x := v.Any().(type) {
	case error:
		return slog.StringValue(r.String(x.Error()))
	case fmt.Stringer:
		return slog.StringValue(r.String(x.String()))
	case []byte:
		return slog.StringValue(r.String(string(x)))
	default:
		text, err := json.Marshal(x)
		if err != nil {
			return slog.StringValue(r.String(fmt.Sprintf("%+v", x)))
		}
		if clean := r.String(string(text)); clean != string(text) {
			return slog.StringValue(clean)
		}
		return v
	}
}

// syncWriter serialises the writes of concurrent hooks (each a whole line) to one writer.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func newSyncWriter(w io.Writer) io.Writer {
	if s, ok := w.(*syncWriter); ok {
		return s
	}
	return &syncWriter{w: w}
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
