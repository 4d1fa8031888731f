package main

import (
	"bytes"
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	buildversion "github.com/stepwise-dev/stepwise/internal/version"
)

func TestVersionFlag(t *testing.T) {
	tests := []struct {
		name            string
		args            []string
		wantVersionOnly bool
		wantErr         string
	}{
		{name: "--version", args: []string{"--version"}, wantVersionOnly: true},
		{name: "-version", args: []string{"-version"}, wantVersionOnly: true},
		// Printed before validate: flags that would not validate do not matter.
		{name: "with flags that would not validate", args: []string{"--workers=0", "--version"}, wantVersionOnly: true},
		{name: "with klog's flags", args: []string{"-v=0", "--version"}, wantVersionOnly: true},
		{name: "no --version: the operator runs", args: []string{"--workers=3"}},
		{name: "--version=false", args: []string{"--version=false"}},
		{name: "a bad flag", args: []string{"--nope", "--version"}, wantErr: "flag provided but not defined: -nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts options
			fs := flag.NewFlagSet("stepwise-operator", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var out bytes.Buffer
			versionOnly, err := opts.parse(fs, tt.args, &out)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Empty(t, out.String())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantVersionOnly, versionOnly)
			if tt.wantVersionOnly {
				assert.Equal(t, "stepwise-operator version "+buildversion.Version+"\n", out.String())
			} else {
				assert.Empty(t, out.String())
			}
		})
	}
}
