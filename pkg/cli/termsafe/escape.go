// Package termsafe is how kubectl-stepwise prints what others wrote, so that a terminal
// shows it rather than obeys it.
//
// Text from the cluster (messages, reasons, step names, what plugins say of themselves,
// errors the API server returns) is written by whoever may write a status, an object a
// step waits on, or a plugin. Printed as is, its control characters would be obeyed by
// the terminal rather than shown: an ESC sequence can retitle the window, clear the
// screen, hide or rewrite what was printed before it (CVE-2021-25743 is kubectl's case of
// this). So everything pkg/cli prints from the cluster goes through OneLine (tables, watch
// lines, errors), Encode (-o json and -o yaml) or EscapeLine (what a plugin run by
// `plugin run` prints).
package termsafe

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// isControl tells whether a terminal may act on r instead of showing it: the C0 controls,
// DEL, and the C1 controls U+0080 to U+009F, which hold 8-bit forms of ESC sequences
// (U+009B is CSI).
func isControl(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f)
}

// OneLine makes cluster text fit a table cell and safe to print: each run of white space
// (newlines, tabs, carriage returns) becomes one space; other control characters and
// bytes that are not UTF-8 are shown escaped, as \x1b, \u009b or \xff, so that a reader
// sees something was there; and the result has at most limit runes (0: no limit).
func OneLine(s string, limit int) string {
	var b strings.Builder
	for i, field := range strings.Fields(s) {
		if i > 0 {
			b.WriteByte(' ')
		}
		writeEscaped(&b, field, false)
	}
	s = b.String()
	if limit > 0 && utf8.RuneCountInString(s) > limit {
		r := []rune(s)
		s = string(r[:limit-1]) + "…"
	}
	return s
}

// EscapeLine makes one line of a plugin's output safe to print, keeping its tabs (a stack
// trace's indentation): every other control character, newlines included, and bytes that
// are not UTF-8 are shown escaped as OneLine shows them.
func EscapeLine(s string) string {
	var b strings.Builder
	writeEscaped(&b, s, true)
	return b.String()
}

// writeEscaped writes s with its control characters (but tabs when keepTabs) and its bytes
// that are not UTF-8 escaped.
func writeEscaped(b *strings.Builder, s string, keepTabs bool) {
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			_, _ = fmt.Fprintf(b, `\x%02x`, s[0])
		case r == '\t' && keepTabs:
			b.WriteByte('\t')
		case isControl(r) && r < utf8.RuneSelf: // C0 and DEL
			_, _ = fmt.Fprintf(b, `\x%02x`, r)
		case isControl(r):
			_, _ = fmt.Fprintf(b, `\u%04x`, r)
		default:
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
}
