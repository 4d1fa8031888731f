package client

import (
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
)

func TestParseLogLine(t *testing.T) {
	tests := []struct {
		name      string
		line      string
		wantOK    bool
		wantLevel hclog.Level
		want      string
	}{
		{
			name: "sdk.Logger's line", line: `{"@level":"warn","@message":"slow","@timestamp":"t","n":3,"who":"Ada Lovelace","ok":true}`,
			wantOK: true, wantLevel: hclog.Warn, want: `[WARN] slow n=3 ok=true who="Ada Lovelace"`,
		},
		{
			name: "a named logger's", line: `{"@level":"error","@message":"plugin exited","@module":"plugin","path":"/x"}`,
			wantOK: true, wantLevel: hclog.Error, want: "[ERROR] plugin: plugin exited path=/x",
		},
		{
			name: "numbers as written, strings quoted when needed", line: `{"@level":"info","@message":"m","big":12345678901234567890,"empty":"","eq":"a=b","list":[1,"x"]}`,
			wantOK: true, wantLevel: hclog.Info, want: `[INFO] m big=12345678901234567890 empty="" eq="a=b" list=[1,"x"]`,
		},
		{
			name: "a level it does not know is Info", line: `{"@level":"notice","@message":"m"}`,
			wantOK: true, wantLevel: hclog.Info, want: "[INFO] m",
		},
		{name: "JSON that is not hclog's", line: `{"a":1}`},
		{name: "plain text", line: "panic: boom"},
		{name: "broken JSON", line: `{"@message":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseLogLine([]byte(tt.line))
			assert.Equal(t, tt.wantOK, ok)
			if tt.wantOK {
				assert.Equal(t, tt.wantLevel, got.Level)
				assert.Equal(t, tt.want, got.String())
			}
		})
	}
}
