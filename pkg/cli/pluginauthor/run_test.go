package pluginauthor_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/cli"
	"github.com/stepwise-dev/stepwise/pkg/cli/pluginauthor"
	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe/termsafetest"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
)

// buildExample builds plugins/example, the plugin to copy, as a user would.
func buildExample(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "stepwise-plugin-example")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "../../../plugins/example").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

func TestPluginRunExample(t *testing.T) {
	bin := buildExample(t)
	data, err := os.ReadFile(bin)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		// wantOut are regular expressions the output matches; wantErr is in stderr.
		wantOut []string
		wantErr string
	}{
		{
			name: "greets", args: []string{"example.greet", "Create", "-p", "name=Ada"},
			wantOut: []string{`(?m)^Plugin: +stepwise-plugin-example \(protocol \d\)$`, `(?m)^Executor: +example.greet\b`,
				`(?m)^Hook: +Create$`, `(?m)^Result: +Done$`, `(?m)^Outputs:\n  greeting +Hello, Ada!$`},
		},
		{
			name: "its checksum, the hook in any case", args: []string{"example.greet", "create", "-p", "name=Ada", "--checksum", hex.EncodeToString(sum[:])},
			wantOut: []string{`(?m)^  greeting +Hello, Ada!$`},
		},
		{
			name: "another checksum", args: []string{"example.greet", "Create", "-p", "name=Ada", "--checksum", strings.Repeat("ab", 32)},
			wantCode: cli.ExitError, wantErr: "its SHA-256 is " + hex.EncodeToString(sum[:]) + ", not the --checksum " + strings.Repeat("ab", 32) + ": not running it",
		},
		{
			name: "not a checksum", args: []string{"example.greet", "Create", "--checksum", "abc"},
			wantCode: cli.ExitError, wantErr: `--checksum "abc" is not a SHA-256 in hex`,
		},
		{
			name: "a required parameter missing: refused before the hook", args: []string{"example.greet", "Create"},
			wantCode: cli.ExitHookFailed,
			wantOut: []string{`(?m)^Hook: +Create \(not called\)$`, `(?m)^Result: +Failed: InvalidParameter \(permanent: the step fails at once\)$`,
				`(?m)^Error: +parameter "name" is required$`},
		},
		{
			name: "an executor it does not serve", args: []string{"example.nope", "Create"},
			wantCode: cli.ExitError, wantErr: `plugin stepwise-plugin-example serves no executor "example.nope"; it serves `,
		},
		{
			name: "not a hook", args: []string{"example.greet", "Update"},
			wantCode: cli.ExitError, wantErr: `hook "Update" is not one of PreCreate, Create, PostCreate, PreDelete, Delete, PostDelete`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runPlugin(t, append([]string{"run", bin}, tt.args...)...)
			require.Equal(t, tt.wantCode, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			for _, re := range tt.wantOut {
				assert.Regexp(t, re, out)
			}
			if tt.wantErr != "" {
				assert.Contains(t, errOut, tt.wantErr)
				assert.Empty(t, out)
			}
		})
	}
}

func TestPluginRunJSON(t *testing.T) {
	bin := buildExample(t)
	code, out, errOut := runPlugin(t, "run", bin, "example.greet", "CREATE", "-p", "name=Ada", "-o", "json")
	require.Equal(t, cli.ExitOK, code, errOut)
	var got pluginauthor.RunReport
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.GreaterOrEqual(t, got.Protocol, proto.Version1)
	assert.Equal(t, "stepwise-plugin-example", got.Plugin)
	assert.Equal(t, "example.greet", got.Executor)
	assert.Equal(t, contract.HookCreate, got.Hook)
	assert.True(t, got.Called)
	assert.Equal(t, pluginauthor.HookDone, got.Result)
	assert.Equal(t, "Hello, Ada!", got.Outputs["greeting"])
	assert.Nil(t, got.Error)
}

func TestPluginRunRequest(t *testing.T) {
	bin := self(t)
	code, out, errOut := runPlugin(t, "run", bin, "test.echo", "Create", "-p", "name=Ada",
		"--secret", "tokenSecret.token=s3cr3t-value", "--secret", "tokenSecret.tls.crt=cert-data", "--state", "k=v", "-o", "json")
	require.Equal(t, cli.ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	var got pluginauthor.RunReport
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, proto.Latest, got.Protocol)
	assert.Equal(t, "v9.9.9", got.Version)
	assert.Equal(t, "token [redacted]", got.Message, "a Secret's value never shows")
	env := got.Outputs["env"]
	delete(got.Outputs, "env")
	assert.Equal(t, map[string]string{
		"pipeline": "local/plugin-run", "uid": pluginauthor.RunUID, "step": "step", "hook": "Create", "attempt": "1",
		"idempotencyKey": pluginauthor.RunUID + "/step/Create", "serviceAccount": "default", "started": "true",
		"name": "Ada", "count": "1", "tokenSecret": "plugin-run-tokensecret",
		"secrets": "tls.crt,token", "secretParam": "tls.crt,token", "state": "map[k:v]", "note": "",
	}, got.Outputs)
	require.NotEmpty(t, env)
	for _, name := range strings.Split(env, ",") {
		assert.True(t, strings.HasPrefix(name, "PLUGIN_") || name == proto.Handshake.MagicCookieKey,
			"the plugin sees go-plugin's variables only, not %s", name)
	}

	assert.Contains(t, errOut, "test: [INFO] echoing ", "the plugin's log lines, parsed")
	assert.Contains(t, errOut, "who=Ada")
	assert.NotContains(t, errOut, "not shown at info")
	assert.Contains(t, errOut, `test: raw line\x1b]0;pwned\x07`, "its other lines, escaped")
	termsafetest.AssertSafe(t, strings.ReplaceAll(errOut, "\t", " "))
}

func TestPluginRunCommand(t *testing.T) {
	bin := self(t)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  []string
		wantErr  string
	}{
		{
			name: "a hook that waits shows its state", args: []string{"test.wait", "Create"},
			wantCode: cli.ExitHookWaiting,
			wantOut: []string{`(?m)^Result: +Waiting: call it again in 10s$`, `(?m)^Message: +operation op-42 started$`, `(?m)^State:\n  operation +op-42$`,
				`(?m)^Blocked by: +Operation op-42\n +PodDisruptionBudget apps/web$`},
		},
		{
			name: "called again with its state", args: []string{"test.wait", "create", "--state", "operation=op-42"},
			wantOut: []string{`(?m)^Result: +Done$`, `(?m)^Message: +operation op-42 finished$`},
		},
		{
			name: "a hook that fails", args: []string{"test.fail", "delete"},
			wantCode: cli.ExitHookFailed,
			wantOut: []string{`(?m)^Hook: +Delete$`, `(?m)^Result: +Failed: Flaky \(retryable: the engine calls it again, with backoff\)$`,
				`(?m)^Error: +boom\\x1b\]0;pwned\\x07`},
		},
		{
			name: "a value not of its type", args: []string{"test.echo", "Create", "-p", "name=Ada", "-p", "count=many"},
			wantCode: cli.ExitHookFailed, wantOut: []string{`(?m)^Error: +parameter "count" is "many", not a whole number$`},
		},
		{
			name: "a parameter not declared", args: []string{"test.echo", "Create", "-p", "name=Ada", "-p", "nome=Ada"},
			wantCode: cli.ExitHookFailed, wantOut: []string{`(?m)^Error: +parameter "nome" is not a parameter of the executor`},
		},
		{
			name: "a Secret named by -p, with no data", args: []string{"test.echo", "Create", "-p", "name=Ada", "-p", "tokenSecret=mine"},
			wantOut: []string{`(?m)^  tokenSecret +mine$`},
			wantErr: "warning: parameter tokenSecret names the Secret mine, and no --secret tokenSecret.KEY=VALUE gives it data",
		},
		{
			name: "--secret for a parameter that names no Secret", args: []string{"test.echo", "Create", "-p", "name=Ada", "--secret", "note.k=v"},
			wantCode: cli.ExitError, wantErr: "--secret note.*: parameter note names no Secret",
		},
		{
			name: "--secret that is not PARAM.KEY=VALUE", args: []string{"test.echo", "Create", "--secret", "tokenSecret=hunter2"},
			wantCode: cli.ExitError, wantErr: `--secret "tokenSecret"=... is not PARAM.KEY=VALUE`,
		},
		{
			name: "a hook that does not answer in time", args: []string{"test.sleep", "Create", "--timeout", "3s"},
			wantCode: cli.ExitError, wantErr: "within 3s (--timeout)",
		},
		{
			name: "what the plugin answers is escaped", args: []string{"test.echo", "Create", "-p", "name=Ada", "-p", "note=" + hostile},
			wantOut: []string{`(?m)^  note +\\x1b\]0;pwned\\x07\\x1b\[2J`},
		},
		{
			name: "and in JSON", args: []string{"test.echo", "Create", "-p", "name=Ada", "-p", "note=" + hostile, "-o", "json"},
			wantOut: []string{`"note": "\\u001b\]0;pwned\\u0007\\u001b\[2J`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// In parallel: this test binary, built with -race, waits a second as it exits.
			t.Parallel()
			code, out, errOut := runPlugin(t, append([]string{"run", bin}, tt.args...)...)
			require.Equal(t, tt.wantCode, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			for _, re := range tt.wantOut {
				assert.Regexp(t, re, out)
			}
			if tt.wantErr != "" {
				assert.Contains(t, errOut, tt.wantErr)
			}
			assert.NotContains(t, out+errOut, "hunter2", "a Secret's value is never quoted")
			termsafetest.AssertSafe(t, out)
		})
	}
}

func TestPluginRunNotAPlugin(t *testing.T) {
	script := filepath.Join(t.TempDir(), "stepwise-plugin-fake")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho 'not a plugin\033[2J' >&2\nexit 1\n"), 0o700))
	code, out, errOut := runPlugin(t, "run", script, "x.y", "Create")
	assert.Equal(t, cli.ExitError, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "is it a Stepwise plugin?")
	assert.Contains(t, errOut, `stepwise-plugin-fake: not a plugin\x1b[2J`, "what it printed, escaped")

	code, _, errOut = runPlugin(t, "run", filepath.Dir(script), "x.y", "Create")
	assert.Equal(t, cli.ExitError, code)
	assert.Contains(t, errOut, "is not an executable file")
}

// TestPluginRunIsTheEngine: plugin run gives a hook what the engine would: a waiting hook
// called again until done with its state and its created record (--until-done), a
// teardown with the record and the step's outputs and a parameter the executor does not
// declare, the hook's and the step's starts, the CIDRs the plugin may reach, or all of it
// from a file (--request).
func TestPluginRunIsTheEngine(t *testing.T) {
	bin := self(t)
	request := filepath.Join(t.TempDir(), "request.yaml")
	require.NoError(t, os.WriteFile(request, []byte(`params: {summary: from the file}
created: {ticket: T-9}
outputs: {step: {ticketID: T-9}}
attempt: 3
hookStarted: 2026-11-26T08:00:00Z
`), 0o600))
	tests := []struct {
		name        string
		args        []string
		wantCode    int
		wantResult  string
		wantOutputs map[string]string
		wantCreated map[string]string
		wantCalls   int
		wantStderr  string
	}{
		{
			name: "a waiting hook to the end", wantResult: pluginauthor.HookDone, wantCalls: 2,
			args: []string{"test.ticket", "Create", "-p", "summary=s", "--until-done", "--allowed-cidrs", "127.0.0.0/8",
				"--hook-started", "2026-11-26T09:00:00Z", "--step-started", "2026-11-26T07:00:00Z"},
			wantOutputs: map[string]string{"ticketID": "T-1", "state": "map[polls:1]", "attempt": "1", "allowed": "127.0.0.0/8",
				"hookStarted": "2026-11-26T09:00:00Z", "stepStarted": "2026-11-26T07:00:00Z"},
			wantCreated: map[string]string{"ticket": "T-1"},
		},
		{
			name: "a waiting hook to the end, called again at once", wantResult: pluginauthor.HookDone, wantCalls: 2,
			args: []string{"test.ticket", "Create", "-p", "summary=s", "--until-done", "--no-wait", "--allowed-cidrs", "127.0.0.0/8",
				"--hook-started", "2026-11-26T09:00:00Z", "--step-started", "2026-11-26T07:00:00Z"},
			wantStderr:  "call 1: waiting 0s: ",
			wantCreated: map[string]string{"ticket": "T-1"},
		},
		{
			name: "without --until-done, one call", wantCode: cli.ExitHookWaiting, wantResult: pluginauthor.HookWaiting, wantCalls: 1,
			args:        []string{"test.ticket", "Create", "-p", "summary=s"},
			wantCreated: map[string]string{"ticket": "T-1"},
		},
		{
			name: "a teardown with what Create left", wantResult: pluginauthor.HookDone, wantCalls: 1,
			args: []string{"test.ticket", "Delete", "-p", "summary=s", "-p", "ticketID=T-1",
				"--created", "ticket=T-1", "--step-output", "ticketID=T-1"},
			wantOutputs: map[string]string{"closed": "T-1", "ownOutput": "T-1", "ticketID": "T-1"},
			wantCreated: map[string]string{"ticket": "T-1"},
		},
		{
			name: "a teardown with nothing recorded", wantCode: cli.ExitHookFailed, wantResult: pluginauthor.HookFailed, wantCalls: 1,
			args: []string{"test.ticket", "Delete", "-p", "summary=s"},
		},
		{
			name: "the request from a file, flags added", wantResult: pluginauthor.HookDone, wantCalls: 1,
			args: []string{"test.ticket", "Create", "--request", request, "--state", "polls=7"},
			wantOutputs: map[string]string{"ticketID": "T-9", "state": "map[polls:7]", "attempt": "3", "allowed": "",
				"hookStarted": "2026-11-26T08:00:00Z", "stepStarted": "2026-11-26T08:00:00Z"},
			wantCreated: map[string]string{"ticket": "T-9"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runPlugin(t, append([]string{"run", bin}, append(tt.args, "-o", "json")...)...)
			require.Equal(t, tt.wantCode, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			var got pluginauthor.RunReport
			require.NoError(t, json.Unmarshal([]byte(out), &got))
			assert.Equal(t, tt.wantResult, got.Result)
			assert.Equal(t, tt.wantCalls, got.Calls)
			assert.Equal(t, tt.wantCreated, got.Created)
			assert.Contains(t, errOut, tt.wantStderr)
			if tt.wantOutputs != nil {
				assert.Equal(t, tt.wantOutputs, got.Outputs)
			}
		})
	}
}

func TestPluginRunRefusesBadRequestInput(t *testing.T) {
	bin := self(t)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("params: {summary: s}\nhookStart: 5m\n"), 0o600))
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"a start that is no time", []string{"--hook-started", "yesterday"}, `--hook-started "yesterday" is neither how long ago (25m) nor an RFC 3339 time`},
		{"a start in the future", []string{"--step-started", "-5m"}, "--step-started -5m is in the future"},
		{"a CIDR that is none", []string{"--allowed-cidrs", "10.0.0.0/33"}, "--allowed-cidrs"},
		{"an unknown field in --request", []string{"--request", bad}, `unknown field "hookStart"`},
		{"a created entry without =", []string{"--created", "ticket"}, "created entry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runPlugin(t, append([]string{"run", bin, "test.ticket", "Create", "-p", "summary=s"}, tt.args...)...)
			assert.Equal(t, cli.ExitError, code)
			assert.Contains(t, errOut, tt.wantErr)
		})
	}
}
