package termsafe

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe/termsafetest"
)

func TestOneLine(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		limit int
		want  string
	}{
		{"whitespace runs become one space", " a\n b\tc ", 0, "a b c"},
		{"truncated", "abcdefgh", 5, "abcd…"},
		{"counts runes, not bytes", "äöü", 3, "äöü"},
		{"OSC: set the window title, ended by BEL", "\x1b]0;pwned\x07done", 0, `\x1b]0;pwned\x07done`},
		{"CSI: clear the screen, colours", "\x1b[2J\x1b[31mred\x1b[0m", 0, `\x1b[2J\x1b[31mred\x1b[0m`},
		{"carriage return cannot overwrite the line", "Succeeded\rFailed   ", 0, "Succeeded Failed"},
		{"backspace, NUL, DEL", "ok\b\b\x00\x7f", 0, `ok\x08\x08\x00\x7f`},
		{"C1 CSI as a character", "\u009b2Jcleared", 0, `\u009b2Jcleared`},
		{"C1 next line is white space", "a\u0085b", 0, "a b"},
		{"invalid UTF-8: a lone C1 byte and others", "a\x9b2J\xff\xc3", 0, `a\x9b2J\xff\xc3`},
		{"the replacement character itself stays", "a\uFFFDb", 0, "a\uFFFDb"},
		{"truncation counts what is shown", "\x1b\x1b\x1b", 6, `\x1b\…`},
		{"printable text is left alone", `C:\dir "quoted" 100% ✓`, 0, `C:\dir "quoted" 100% ✓`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := OneLine(tt.in, tt.limit)
			assert.Equal(t, tt.want, got)
			termsafetest.AssertSafe(t, got)
			assert.Equal(t, got, OneLine(got, tt.limit), "idempotent")
		})
	}
}

func TestEscapeLine(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"tabs kept: a stack trace's indentation", "\tmain.go:12 +0x1d", "\tmain.go:12 +0x1d"},
		{"spaces kept", "a  b", "a  b"},
		{"newline and carriage return escaped", "a\r\nb", `a\x0d\x0ab`},
		{"ESC, C1 and bytes that are not UTF-8", "\x1b[2J\u009b\xff✓", `\x1b[2J\u009b\xff✓`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, EscapeLine(tt.in))
		})
	}
}
