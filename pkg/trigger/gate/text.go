package gate

import (
	"strings"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// truncate cuts s to at most n bytes, at a character boundary (contract.Truncate, which
// also makes it valid UTF-8).
func truncate(s string, n int) string { return contract.Truncate(s, n) }

// maxErrorText bounds the text an error carries from CEL or from a Prometheus server, so
// that a status or event that shows it stays readable and within the API's size limits.
const maxErrorText = 512

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
