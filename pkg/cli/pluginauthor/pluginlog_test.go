package pluginauthor

import (
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPluginLog(t *testing.T) {
	tests := []struct {
		name  string
		level hclog.Level
		in    []string // writes to the plugin's standard error
		want  string
	}{
		{name: "lines split across writes", level: hclog.Info, in: []string{"one\ntw", "o\n", "three"}, want: "p: one\np: two\np: three\n"},
		{name: "hclog JSON at its level", level: hclog.Info,
			in:   []string{`{"@level":"warn","@message":"slow","@timestamp":"t","n":3,"who":"Ada Lovelace","ok":true}` + "\n"},
			want: "p: [WARN] slow n=3 ok=true who=\"Ada Lovelace\"\n"},
		{name: "below the level", level: hclog.Info, in: []string{`{"@level":"debug","@message":"plugin address"}` + "\n"}, want: ""},
		{name: "off", level: hclog.Off, in: []string{`{"@level":"error","@message":"x"}` + "\n", "plain\n"}, want: "p: plain\n"},
		{name: "JSON that is not hclog's", level: hclog.Info, in: []string{`{"a":1}` + "\n"}, want: "p: {\"a\":1}\n"},
		{name: "control characters escaped, tabs kept", level: hclog.Info, in: []string{"\tat main\x1b[2J\r\n"}, want: "p: \tat main\\x1b[2J\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			l := newPluginLog(&b, "p: ", tt.level)
			w := l.source(true)
			for _, s := range tt.in {
				_, err := w.Write([]byte(s))
				require.NoError(t, err)
			}
			l.close()
			_, _ = w.Write([]byte("after close\n"))
			assert.Equal(t, tt.want, b.String())
		})
	}
}
