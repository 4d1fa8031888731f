package main

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parseFlags is the options of the command line args.
func parseFlags(t *testing.T, args ...string) *options {
	t.Helper()
	var opts options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	opts.addFlags(fs)
	require.NoError(t, fs.Parse(args))
	return &opts
}

// validates asserts what opts.validate says: an error that contains wantErr and none of
// the non-empty notInError, or, with wantErr "", no error. It reports whether opts are
// valid.
func validates(t *testing.T, opts *options, wantErr string, notInError ...string) bool {
	t.Helper()
	err := opts.validate()
	if wantErr == "" {
		require.NoError(t, err)
		return true
	}
	require.ErrorContains(t, err, wantErr)
	for _, s := range notInError {
		if s != "" {
			assert.NotContains(t, err.Error(), s)
		}
	}
	return false
}

// flagCase is a command line and the error validate finds in it ("" for none).
type flagCase struct {
	name    string
	args    []string
	wantErr string
}

// assertValidation checks each case, in a subtest of its name, with validates.
func assertValidation(t *testing.T, cases []flagCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			validates(t, parseFlags(t, tt.args...), tt.wantErr)
		})
	}
}

func TestTriggerFlags(t *testing.T) {
	assertValidation(t, []flagCase{
		{name: "defaults"},
		{name: "another kind", args: []string{"--trigger-resources=nodes,deployments.apps"}},
		{name: "none", args: []string{"--trigger-resources="}},
		{name: "not a resource", args: []string{"--trigger-resources=Nodes"}, wantErr: `"Nodes": not a resource.group`},
		{name: "no workers", args: []string{"--trigger-workers=0"}, wantErr: "--trigger-workers must be at least 1"},
		{name: "negative hook call bound", args: []string{"--hook-call-timeout=-1s"}, wantErr: "--hook-call-timeout must not be negative"},
		{name: "a metrics certificate and its key", args: []string{"--metrics-tls-cert-file=tls.crt", "--metrics-tls-key-file=tls.key"}},
		{name: "a metrics certificate without its key", args: []string{"--metrics-tls-cert-file=tls.crt"}, wantErr: "go together"},
		{name: "a metrics certificate for plain HTTP", args: []string{"--metrics-secure=false", "--metrics-tls-cert-file=tls.crt", "--metrics-tls-key-file=tls.key"}, wantErr: "need --metrics-secure"},
		{name: "plain HTTP metrics", args: []string{"--metrics-secure=false"}},
	})
	opts := parseFlags(t)
	assert.Equal(t, "nodes,webapps.demo.stepwise.dev", opts.triggerResources)
	assert.Equal(t, 2, opts.triggerWorkers)
}

func TestPluginFlags(t *testing.T) {
	tests := []struct {
		name            string
		args            []string
		wantErr         string
		wantMemoryLimit int64
		wantEnv         []string
		wantEnvFor      map[string][]string
	}{
		{
			name:            "defaults",
			wantMemoryLimit: 256 << 20,
			wantEnv:         []string{"STEPWISE_PLUGIN_ALLOWED_CIDRS="},
		},
		{name: "memory limit", args: []string{"--plugin-memory-limit=1Gi"}, wantMemoryLimit: 1 << 30, wantEnv: []string{"STEPWISE_PLUGIN_ALLOWED_CIDRS="}},
		{name: "no memory limit", args: []string{"--plugin-memory-limit=0"}, wantEnv: []string{"STEPWISE_PLUGIN_ALLOWED_CIDRS="}},
		{name: "memory limit not a quantity", args: []string{"--plugin-memory-limit=lots"}, wantErr: `--plugin-memory-limit: "lots" is not a quantity`},
		{name: "negative memory limit", args: []string{"--plugin-memory-limit=-1Gi"}, wantErr: "--plugin-memory-limit must not be negative"},
		{name: "memory limit in bytes by mistake", args: []string{"--plugin-memory-limit=512"}, wantErr: "--plugin-memory-limit must be 0 (no limit) or at least 128Mi"},
		{
			name: "CIDRs for one plugin, added to everyone's",
			args: []string{
				"--plugin-allowed-cidrs=127.0.0.0/8",
				"--plugin-allowed-cidrs-for=vsphere=10.20.0.0/16, 10.21.0.0/16",
				"--plugin-allowed-cidrs-for=stepwise-plugin-openstack=fd00:1::/64",
				"--plugin-allowed-cidrs-for=vsphere=10.22.0.0/16",
			},
			wantMemoryLimit: 256 << 20,
			wantEnv:         []string{"STEPWISE_PLUGIN_ALLOWED_CIDRS=127.0.0.0/8"},
			wantEnvFor: map[string][]string{
				"stepwise-plugin-vsphere":   {"STEPWISE_PLUGIN_ALLOWED_CIDRS=127.0.0.0/8,10.20.0.0/16,10.21.0.0/16,10.22.0.0/16"},
				"stepwise-plugin-openstack": {"STEPWISE_PLUGIN_ALLOWED_CIDRS=127.0.0.0/8,fd00:1::/64"},
			},
		},
		{
			name:            "CIDRs for one plugin alone",
			args:            []string{"--plugin-allowed-cidrs-for=vsphere=10.20.0.0/16"},
			wantMemoryLimit: 256 << 20,
			wantEnv:         []string{"STEPWISE_PLUGIN_ALLOWED_CIDRS="},
			wantEnvFor:      map[string][]string{"stepwise-plugin-vsphere": {"STEPWISE_PLUGIN_ALLOWED_CIDRS=10.20.0.0/16"}},
		},
		{name: "no plugin", args: []string{"--plugin-allowed-cidrs-for=10.20.0.0/16"}, wantErr: `--plugin-allowed-cidrs-for: "10.20.0.0/16" is not PLUGIN=CIDR[,CIDR...]`},
		{name: "empty plugin", args: []string{"--plugin-allowed-cidrs-for==10.20.0.0/16"}, wantErr: `"=10.20.0.0/16" is not PLUGIN=CIDR[,CIDR...]`},
		{name: "no CIDR", args: []string{"--plugin-allowed-cidrs-for=vsphere="}, wantErr: `"vsphere=" is not PLUGIN=CIDR[,CIDR...]`},
		{name: "a path, not a plugin name", args: []string{"--plugin-allowed-cidrs-for=../vsphere=10.20.0.0/16"}, wantErr: `plugin "../vsphere" is not the name of a plugin`},
		{name: "bad CIDR", args: []string{"--plugin-allowed-cidrs-for=vsphere=10.20.0.0/33"}, wantErr: `--plugin-allowed-cidrs-for: plugin vsphere: allowed CIDR 1, "10.20.0.0/33", is not a CIDR`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := parseFlags(t, tt.args...)
			if !validates(t, opts, tt.wantErr) {
				return
			}
			limit, err := opts.memoryLimit()
			require.NoError(t, err)
			assert.Equal(t, tt.wantMemoryLimit, limit)
			env, envFor, err := opts.pluginEnv()
			require.NoError(t, err)
			assert.Equal(t, tt.wantEnv, env)
			assert.Equal(t, tt.wantEnvFor, envFor)
		})
	}
}

func TestInstalledPluginFlags(t *testing.T) {
	assertValidation(t, []flagCase{
		{name: "neither"},
		{name: "both", args: []string{"--plugin-dir=/usr/local/lib/stepwise/plugins", "--installed-plugin-dir=/var/lib/stepwise/plugins", "--installed-plugin-checksums=/etc/stepwise/installed-plugins/SHA256SUMS"}},
		{name: "both, without the image's", args: []string{"--installed-plugin-dir=/var/lib/stepwise/plugins", "--installed-plugin-checksums=/etc/stepwise/installed-plugins/SHA256SUMS"}},
		{name: "directory alone", args: []string{"--installed-plugin-dir=/var/lib/stepwise/plugins"}, wantErr: "--installed-plugin-dir needs --installed-plugin-checksums"},
		{name: "checksums alone", args: []string{"--installed-plugin-checksums=/etc/stepwise/installed-plugins/SHA256SUMS"}, wantErr: "--installed-plugin-checksums needs --installed-plugin-dir"},
		{name: "the image's directory", args: []string{"--plugin-dir=/plugins", "--installed-plugin-dir=/plugins/", "--installed-plugin-checksums=/etc/SHA256SUMS"}, wantErr: "--installed-plugin-dir must be another directory than --plugin-dir"},
	})
}

func TestArchiveFlags(t *testing.T) {
	assertValidation(t, []flagCase{
		{name: "off"},
		{name: "on, served, kept a year", args: []string{"--archive-dsn-file=/etc/dsn", "--history-secure-port=8443", "--archive-retention=8760h", "--default-retention=720h"}},
		{name: "history without an archive", args: []string{"--history-secure-port=8443"}, wantErr: "--history-secure-port needs --archive-dsn-file"},
		{name: "a port past the last", args: []string{"--archive-dsn-file=/etc/dsn", "--history-secure-port=70000"}, wantErr: "must be a port"},
		{name: "a certificate without its key", args: []string{"--history-tls-cert-file=/c"}, wantErr: "go together"},
		{name: "served on loopback", args: []string{"--archive-dsn-file=/etc/dsn", "--history-secure-port=8443", "--history-bind-address=127.0.0.1"}},
		{name: "a bind address that is a name", args: []string{"--archive-dsn-file=/etc/dsn", "--history-secure-port=8443", "--history-bind-address=localhost"}, wantErr: "--history-bind-address must be an IP address"},
		{name: "record retention without an archive", args: []string{"--archive-retention=1h"}, wantErr: "--archive-retention needs --archive-dsn-file"},
		{name: "negative record retention", args: []string{"--archive-dsn-file=/etc/dsn", "--archive-retention=-1h"}, wantErr: "--archive-retention must not be negative"},
		{name: "default retention without an archive", args: []string{"--default-retention=1h"}, wantErr: "--default-retention needs --archive-dsn-file"},
	})
}
