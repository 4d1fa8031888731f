package main

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTriggerFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "defaults"},
		{name: "another kind", args: []string{"--trigger-resources=nodes,deployments.apps"}},
		{name: "none", args: []string{"--trigger-resources="}},
		{name: "not a resource", args: []string{"--trigger-resources=Nodes"}, wantErr: `"Nodes": not a resource.group`},
		{name: "no workers", args: []string{"--trigger-workers=0"}, wantErr: "--trigger-workers must be at least 1"},
		{name: "negative hook call bound", args: []string{"--hook-call-timeout=-1s"}, wantErr: "--hook-call-timeout must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts options
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			opts.addFlags(fs)
			require.NoError(t, fs.Parse(tt.args))
			err := opts.validate()
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
		})
	}
	var opts options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	opts.addFlags(fs)
	assert.Equal(t, "nodes,webapps.demo.stepwise.dev", opts.triggerResources)
	assert.Equal(t, 2, opts.triggerWorkers)
}
