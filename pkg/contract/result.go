package contract

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// Result is what a hook answers when it did not fail.
type Result struct {
	// Done is true once the hook's work is finished.
	Done bool
	// RequeueAfter is when to call the hook again when it is not done.
	RequeueAfter time.Duration
	// Outputs are merged into the step's outputs, for later steps and for the status.
	Outputs map[string]string
	// Message is a short line for the step's status, such as "3 pods left".
	Message string
	// State is kept for the hook's next call when it is not done (Request.State): a start
	// time, an operation ID. Bounded by MaxStateEntries and MaxStateSize. Dropped once the
	// hook is done: what teardown needs goes in Created.
	State map[string]string
	// Created records what the hook created, such as a remote ID, merged into the step's
	// record (Request.Created) whether the hook is done or waits, and given to every later
	// hook of the step, its teardown included. Bounded by MaxCreatedEntries and
	// MaxCreatedSize.
	Created map[string]string
	// BlockedBy names the objects a hook that is not done waits on, such as the
	// PodDisruptionBudgets that refuse a drain's evictions: the step's status keeps the
	// first 16, for a trigger and a person to see what holds it back without reading its
	// message.
	BlockedBy []Blocker
}

// Blocker is an object that holds a hook's work back.
type Blocker struct {
	// Kind is the object's kind, such as PodDisruptionBudget.
	Kind string
	// Namespace is empty for an object that has none.
	Namespace string
	Name      string
}

// String is the blocker as a person reads it: Kind namespace/name.
func (b Blocker) String() string {
	if b.Namespace == "" {
		return b.Kind + " " + b.Name
	}
	return b.Kind + " " + b.Namespace + "/" + b.Name
}

// Blocked returns r waiting on the given objects.
func (r Result) Blocked(by ...Blocker) Result {
	r.BlockedBy = by
	return r
}

// Bounds of a hook's State: it is kept in the step's status.
const (
	MaxStateEntries = 16
	MaxStateSize    = 4 << 10
)

// Bounds of a step's created record: it is kept in the step's status.
const (
	MaxCreatedEntries = 16
	MaxCreatedSize    = 4 << 10
)

// WithCreated returns r recording what the hook created, for the step's teardown.
func (r Result) WithCreated(created map[string]string) Result {
	r.Created = created
	return r
}

// WithState returns r keeping state for the hook's next call.
func (r Result) WithState(state map[string]string) Result {
	r.State = state
	return r
}

// Done is the Result of a finished hook.
func Done(message string) Result { return Result{Done: true, Message: message} }

// DoneWithOutputs is the Result of a finished hook that reports outputs.
func DoneWithOutputs(message string, outputs map[string]string) Result {
	return Result{Done: true, Message: message, Outputs: outputs}
}

// Wait is the Result of a hook whose work goes on: ask again after the given time.
func Wait(after time.Duration, message string) Result {
	return Result{RequeueAfter: after, Message: message}
}

// Truncate cuts s to at most n bytes at a rune boundary, marking the cut with "...", and
// makes it valid UTF-8: what a status, an Event or a protobuf string may carry.
func Truncate(s string, n int) string {
	s = ValidUTF8(s)
	if len(s) <= n {
		return s
	}
	const mark = "..."
	if n <= len(mark) {
		return mark[:max(n, 0)]
	}
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// ValidUTF8 returns s with every byte that is not part of a UTF-8 character replaced by
// U+FFFD: protobuf strings, JSON and terminals need valid text, and a receiver's answer or
// an error body cut mid-character is not.
func ValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	out := make([]rune, 0, len(s))
	for _, r := range s {
		out = append(out, r) // invalid bytes decode as utf8.RuneError
	}
	return string(out)
}

// CheckState tells whether a hook's state fits the bounds of what a step's status keeps
// (MaxStateEntries, MaxStateSize): the engine refuses a state over them, and plugintest
// fails a plugin's test on one.
func CheckState(state map[string]string) error {
	size := 0
	for k, v := range state {
		size += len(k) + len(v)
	}
	if len(state) > MaxStateEntries || size > MaxStateSize {
		return fmt.Errorf("the hook keeps %d state entries of %d bytes; at most %d entries and %d bytes",
			len(state), size, MaxStateEntries, MaxStateSize)
	}
	return nil
}
