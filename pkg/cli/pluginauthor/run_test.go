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
