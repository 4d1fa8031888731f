package pluginauthor

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"k8s.io/cli-runtime/pkg/printers"

	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// pluginRunReport is what `plugin run` prints: what the hook answered.
type pluginRunReport struct {
	// Plugin is the executable's file name.
	Plugin string `json:"plugin"`
	// Protocol is the plugin protocol version the plugin and the CLI agreed on.
	Protocol int    `json:"protocol"`
	Executor string `json:"executor"`
	// Version is the executor's, as it describes itself.
	Version string        `json:"version,omitempty"`
	Hook    contract.Hook `json:"hook"`
	// Called is false when the hook was not called: the engine would have refused the
	// request first (Error says why).
	Called bool `json:"called"`
	// Result is Done, Waiting or Failed.
	Result string `json:"result"`
	// RequeueAfter is when a waiting hook wants to be called again, e.g. "10s".
	RequeueAfter string            `json:"requeueAfter,omitempty"`
	Message      string            `json:"message,omitempty"`
	Outputs      map[string]string `json:"outputs,omitempty"`
	State        map[string]string `json:"state,omitempty"`
	// Created is the step's created record after the call: what it was given (--created)
	// with what the hook recorded; a teardown is given it (--created).
	Created map[string]string `json:"created,omitempty"`
	// Calls counts the calls made: more than one with --until-done.
	Calls int `json:"calls,omitempty"`
	// requeueAfter is RequeueAfter, typed, for the next call of --until-done.
	requeueAfter time.Duration
	// BlockedBy are the objects a waiting hook says it waits on, as Kind namespace/name.
	BlockedBy []string   `json:"blockedBy,omitempty"`
	Error     *hookError `json:"error,omitempty"`
}

// hookError is a failed hook, as the step's condition would show it.
type hookError struct {
	Reason string `json:"reason"`
	// Permanent errors fail the step at once; the engine retries the others with backoff.
	Permanent bool   `json:"permanent"`
	Message   string `json:"message"`
}

// failed records err as the hook's failure, with the reason the step's condition would
// show.
func (r *pluginRunReport) failed(err error) {
	r.Result = hookFailed
	r.Error = &hookError{Reason: executor.ReasonFor(err), Permanent: contract.IsPermanent(err), Message: err.Error()}
}

// printPluginRun writes the report as a short block, every value from the plugin through
// termsafe.OneLine.
func printPluginRun(w io.Writer, r *pluginRunReport) error {
	tw := printers.GetNewTabWriter(w)
	_, _ = fmt.Fprintf(tw, "Plugin:\t%s (protocol %d)\n", termsafe.OneLine(r.Plugin, 0), r.Protocol)
	executor := termsafe.OneLine(r.Executor, 0)
	if r.Version != "" {
		executor += " " + termsafe.OneLine(r.Version, 0)
	}
	_, _ = fmt.Fprintf(tw, "Executor:\t%s\n", executor)
	hook := string(r.Hook)
	if !r.Called {
		hook += " (not called)"
	}
	_, _ = fmt.Fprintf(tw, "Hook:\t%s\n", hook)
	if r.Calls > 1 {
		_, _ = fmt.Fprintf(tw, "Calls:\t%d\n", r.Calls)
	}
	switch r.Result {
	case hookWaiting:
		_, _ = fmt.Fprintf(tw, "Result:\tWaiting: call it again in %s\n", r.RequeueAfter)
	case hookFailed:
		kind := "retryable: the engine calls it again, with backoff"
		if r.Error.Permanent {
			kind = "permanent: the step fails at once"
		}
		_, _ = fmt.Fprintf(tw, "Result:\tFailed: %s (%s)\n", termsafe.OneLine(r.Error.Reason, 0), kind)
		_, _ = fmt.Fprintf(tw, "Error:\t%s\n", termsafe.OneLine(r.Error.Message, 0))
	default:
		_, _ = fmt.Fprintf(tw, "Result:\t%s\n", r.Result)
	}
	if r.Message != "" {
		_, _ = fmt.Fprintf(tw, "Message:\t%s\n", termsafe.OneLine(r.Message, 0))
	}
	for i, b := range r.BlockedBy {
		title := ""
		if i == 0 {
			title = "Blocked by:"
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\n", title, termsafe.OneLine(b, 0))
	}
	for _, block := range []struct {
		title  string
		values map[string]string
	}{{"Outputs", r.Outputs}, {"State", r.State}, {"Created", r.Created}} {
		if len(block.values) == 0 {
			continue
		}
		_, _ = fmt.Fprintf(tw, "%s:\n", block.title)
		for _, k := range slices.Sorted(maps.Keys(block.values)) {
			_, _ = fmt.Fprintf(tw, "  %s\t%s\n", termsafe.OneLine(k, 0), termsafe.OneLine(block.values[k], 0))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the hook's answer: %w", err)
	}
	return nil
}
