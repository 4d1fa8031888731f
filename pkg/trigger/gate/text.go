package gate

import (
	"strings"
	"unicode/utf8"
)

// maxErrorText bounds the text an error carries from CEL or from a Prometheus server, so
// that a status or event that shows it stays readable and within the API's size limits.
const maxErrorText = 512

// truncate cuts s to at most n bytes, at a rune boundary, marking the cut with "...".
func truncate(s string, n int) string {
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

// oneLine folds runs of whitespace (CEL's issues span lines, a server's body too) into a
// space, so that the text reads on one line of a status.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// trimmedError carries err's message trimmed, and err itself for errors.Is and As.
type trimmedError struct {
	msg string
	err error
}

func (e *trimmedError) Error() string { return e.msg }
func (e *trimmedError) Unwrap() error { return e.err }

// trimmed is err with its message cut to maxErrorText bytes; nil stays nil.
func trimmed(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if len(msg) <= maxErrorText {
		return err
	}
	return &trimmedError{msg: truncate(msg, maxErrorText), err: err}
}
