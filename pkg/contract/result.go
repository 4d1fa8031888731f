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

// Bounds of the maps of a Result that a step's status keeps: entries, and bytes of keys
// and values. The CRD's schema says the same (crd/crd_test.go checks), the engine fails a
// step whose hooks return more, and plugintest fails a plugin's test on it.
const (
	// MaxOutputs and MaxOutputsSize bound a step's outputs, from all its hooks.
	MaxOutputs     = 32
	MaxOutputsSize = 4 << 10
	// MaxStateEntries and MaxStateSize bound what a waiting hook keeps (State).
	MaxStateEntries = 16
	MaxStateSize    = 4 << 10
	// MaxCreatedEntries and MaxCreatedSize bound a step's created record, from all its
	// hooks.
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

// CheckState tells whether a hook's state fits what a step's status keeps
// (MaxStateEntries, MaxStateSize).
func CheckState(state map[string]string) error {
	return checkKept("state entries", state, MaxStateEntries, MaxStateSize)
}

// CheckOutputs tells whether a step's outputs, merged from its hooks, fit what its status
// keeps (MaxOutputs, MaxOutputsSize).
func CheckOutputs(outputs map[string]string) error {
	return checkKept("outputs", outputs, MaxOutputs, MaxOutputsSize)
}

// CheckCreated tells whether a step's created record, merged from its hooks, fits what its
// status keeps (MaxCreatedEntries, MaxCreatedSize).
func CheckCreated(created map[string]string) error {
	return checkKept("created entries", created, MaxCreatedEntries, MaxCreatedSize)
}

func checkKept(what string, m map[string]string, maxEntries, maxSize int) error {
	size := 0
	for k, v := range m {
		size += len(k) + len(v)
	}
	if len(m) > maxEntries || size > maxSize {
		return fmt.Errorf("%d %s of %d bytes; a step keeps at most %d %s of %d bytes",
			len(m), what, size, maxEntries, what, maxSize)
	}
	return nil
}
