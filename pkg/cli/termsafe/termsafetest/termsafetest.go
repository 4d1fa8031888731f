// Package termsafetest holds what the tests of kubectl-stepwise's commands share to check
// that nothing they print from the cluster or a plugin can drive a terminal.
package termsafetest

import (
	"fmt"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

// Hostile is text a tenant can get into a status (a message an object's condition
// carries, which k8s.wait quotes) or a plugin into the catalogue.
const Hostile = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\rFAKE\u009b31m\x7f\xff\tend"

// AssertSafe fails when out holds anything a terminal acts on rather than shows: a control
// character other than a newline, or bytes that are not UTF-8.
func AssertSafe(t testing.TB, out string) {
	t.Helper()
	var bad []string
	for i, r := range out {
		if _, size := utf8.DecodeRuneInString(out[i:]); r == utf8.RuneError && size == 1 {
			bad = append(bad, fmt.Sprintf("byte %#x at %d", out[i], i))
			continue
		}
		if r != '\n' && (r < 0x20 || (r >= 0x7f && r <= 0x9f)) {
			bad = append(bad, fmt.Sprintf("%U at %d", r, i))
		}
	}
	assert.Empty(t, bad, "what a terminal would act on, in:\n%q", out)
}
