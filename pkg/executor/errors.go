package executor

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// Retryable marks err as worth retrying, with a reason for the step's condition.
func Retryable(reason string, err error) error {
	return &Error{Reason: reason, Err: err}
}

// IsPermanent tells whether err, or an error it wraps, was marked permanent.
func IsPermanent(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Permanent
}

// Reasons the engine gives failures that carry no reason of their own.
const (
	ReasonHookFailed = "HookFailed"
	ReasonTimeout    = "Timeout"
)

// ReasonFor is the CamelCase reason a step's condition shows for err: the executor's
// own, else the Kubernetes API's (such as "Forbidden"), else a generic one.
func ReasonFor(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Reason != "" {
		return e.Reason
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ReasonTimeout
	}
	if reason := apierrors.ReasonForError(err); reason != "" && reason != "Unknown" {
		return string(reason)
	}
	return ReasonHookFailed
}
