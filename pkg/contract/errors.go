package contract

import (
	"context"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Error is a hook failure that says whether retrying can help and why, in a CamelCase
// reason for the step's condition.
type Error struct {
	// Reason is a CamelCase word for the step's condition, e.g. "InvalidParameter".
	Reason string
	// Permanent errors fail the step at once; others are retried with backoff.
	Permanent bool
	Err       error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Permanent marks err as one that no retry can fix (bad parameters, a thing that will
// never exist): the step fails at once with the given reason.
func Permanent(reason string, err error) error {
	return &Error{Reason: reason, Permanent: true, Err: err}
}

// Retryable marks err as worth retrying, with a reason for the step's condition. A plain
// error is retryable too, with reason HookFailed.
func Retryable(reason string, err error) error {
	return &Error{Reason: reason, Err: err}
}

// IsPermanent tells whether err, or an error it wraps, was marked permanent.
func IsPermanent(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Permanent
}

// Reasons the contract itself gives.
const (
	// ReasonHookFailed is the reason of an error that carries none of its own.
	ReasonHookFailed = "HookFailed"
	// ReasonTimeout is the reason of a hook that ran past its attempt's deadline.
	ReasonTimeout = "Timeout"
	// ReasonHookCallTimeout is the reason of a call that did not answer within the
	// engine's bound on one call: long work returns Wait rather than hold a worker.
	ReasonHookCallTimeout = "HookCallTimeout"
	// ReasonUnknownHook is the reason of a call of a hook that does not exist.
	ReasonUnknownHook = "UnknownHook"
	// ReasonUnknownExecutor is the reason of a step naming an executor nobody serves.
	ReasonUnknownExecutor = "UnknownExecutor"
	// ReasonInvalidParameter is the reason of a step whose parameters cannot be used.
	ReasonInvalidParameter = "InvalidParameter"
)

// OwnReason is the reason err carries: the executor's own, Timeout for a deadline, or ""
// when it has none (the engine then asks the Kubernetes API's error, then HookFailed).
func OwnReason(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Reason != "" {
		return e.Reason
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ReasonTimeout
	}
	return ""
}

// maxReasonLength bounds a reason: Kubernetes allows 1024 bytes, a reason is a word.
const maxReasonLength = 64

// NormalizeReason returns reason as a Kubernetes condition accepts it: a CamelCase word of
// letters, digits and underscores that starts with a letter. "rate limited" becomes
// "RateLimited"; a reason with nothing usable becomes HookFailed. A reason the API server
// refuses would fail every status write, and with it the record of the attempt.
func NormalizeReason(reason string) string {
	var b strings.Builder
	upper := true
	for _, r := range reason {
		switch {
		case r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_'):
			if b.Len() == 0 && !unicode.IsLetter(r) {
				continue
			}
			if upper {
				r = unicode.ToUpper(r)
			}
			b.WriteRune(r)
			upper = false
		default:
			upper = true
		}
		if b.Len() == maxReasonLength {
			break
		}
	}
	if b.Len() == 0 {
		return ReasonHookFailed
	}
	return b.String()
}
