package client

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
)

// Reasons of the errors of a call that the client gives, not the plugin.
const (
	// ReasonPluginUnavailable is the (retryable) reason of a call whose plugin died, could
	// not be started or cannot be reached.
	ReasonPluginUnavailable = "PluginUnavailable"
	// ReasonPluginProtocolError is the reason of a call whose answer broke the plugin
	// protocol while the plugin itself serves on.
	ReasonPluginProtocolError = "PluginProtocolError"
)

// Stage is how far a call got.
type Stage int

const (
	// Answered: the plugin answered with the hook's outcome, its error included (or the
	// call did not fail).
	Answered Stage = iota
	// NotSent: the request was refused before it was sent (over the protocol's size
	// limit); the plugin never saw it.
	NotSent
	// NoAnswer: the call failed on its way: the caller's deadline or cancellation, the
	// plugin's death, a lost connection, a message gRPC refused.
	NoAnswer
	// NoOutcome: the plugin answered, with neither a result nor an error.
	NoOutcome
)

// Reached tells whether the plugin answered the call: its process serves.
func (s Stage) Reached() bool { return s == Answered || s == NoOutcome }

// CallError is a call that brought back no outcome of the plugin's own. Err is the
// contract's error the engine acts on (its reason and permanence); Stage says how far the
// call got, for a caller that reports a failed call otherwise than a failed hook.
type CallError struct {
	Stage Stage
	Err   error
}

func (e *CallError) Error() string { return e.Err.Error() }
func (e *CallError) Unwrap() error { return e.Err }

// StageOf is how far the call that returned err got: Answered unless err is, or wraps, a
// *CallError.
func StageOf(err error) Stage {
	var ce *CallError
	if errors.As(err, &ce) {
		return ce.Stage
	}
	return Answered
}

// callSite names a call in its errors.
type callSite struct {
	plugin string
	// executor is the executor called; "" for Describe.
	executor string
	// restarts: the owner starts the plugin again on the next call (Options.Restarts).
	restarts bool
}

// callError is the one translation of a gRPC call that failed into the contract's error,
// as a *CallError of stage NoAnswer. The caller's deadline or cancellation stays that
// (reason Timeout for a deadline); a message over gRPC's limit is a permanent
// MessageTooLarge; a plugin that died, or whose connection is lost, is a retryable
// PluginUnavailable (its owner replaces it); anything else the live plugin answered this
// call alone with, the same way each time, so it is a permanent PluginProtocolError. gone
// is asked only when the code leaves open whether the process died.
func callError(ctx context.Context, site callSite, err error, gone func() (died bool, why string)) error {
	return &CallError{Stage: NoAnswer, Err: contractError(ctx, site, err, gone)}
}

func contractError(ctx context.Context, site callSite, err error, gone func() (died bool, why string)) error {
	subject, during := "plugin "+site.plugin+": executor "+site.executor, "the hook"
	if site.executor == "" {
		subject, during = "plugin "+site.plugin+": describe", "Describe"
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s: %w", subject, ctxErr)
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.DeadlineExceeded:
		// gRPC sends the deadline to the plugin, whose side may end the call a moment
		// before the caller's timer says so.
		return fmt.Errorf("plugin %s: %w", site.plugin, context.DeadlineExceeded)
	case codes.Canceled:
		return fmt.Errorf("plugin %s: %w", site.plugin, context.Canceled)
	case codes.ResourceExhausted:
		return contract.Permanent(proto.ReasonMessageTooLarge, fmt.Errorf("%s: %s", subject, st.Message()))
	}
	restart := ""
	if site.restarts {
		restart = " (it is restarted on the next call)"
	}
	if died, why := gone(); died {
		if why != "" {
			why = ", " + why
		}
		return contract.Retryable(ReasonPluginUnavailable, fmt.Errorf("plugin %s died during %s%s%s: %s", site.plugin, during, why, restart, st.Message()))
	}
	if st.Code() == codes.Unavailable {
		// Alive but unreachable: no call can get through.
		return contract.Retryable(ReasonPluginUnavailable, fmt.Errorf("plugin %s: connection lost%s: %s", site.plugin, restart, st.Message()))
	}
	// The process serves on: this call alone failed, the same way each time it is made.
	return contract.Permanent(ReasonPluginProtocolError, fmt.Errorf("%s: %s", subject, st.Message()))
}

// noOutcome is the error of an answer with neither a result nor an error: retryable, as
// the plugin may answer the next call well.
func noOutcome(plugin string, err error) error {
	return &CallError{Stage: NoOutcome, Err: contract.Retryable(ReasonPluginProtocolError, fmt.Errorf("plugin %s: %w", plugin, err))}
}
