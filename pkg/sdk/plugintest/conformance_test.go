package plugintest_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

// token is the Secret value the executors below leak, each in its own way.
const token = "whsec-test-key-0123456789"

// leaky leaks token in the way its mode says.
type leaky struct {
	sdk.Base
	mode string
}

func (leaky) Name() string { return "test.leaky" }

func (l leaky) Create(ctx context.Context, req *sdk.Request) (sdk.Result, error) {
	secret := string(req.Secrets["token"])
	switch l.mode {
	case "as it is":
		// The SDK's server removes it: nothing reaches the engine.
		return sdk.DoneWithOutputs("using "+secret, map[string]string{"token": secret}), nil
	case "base64":
		return sdk.DoneWithOutputs("done", map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(secret))}), nil
	case "cut":
		return sdk.Done("using key " + secret[:16] + "..."), nil
	case "by parameter":
		return sdk.Done("key " + hex.EncodeToString(req.Secret("credentialsSecret")["token"])), nil
	case "when unreachable":
		httpReq, err := http.NewRequestWithContext(ctx, http.MethodGet, req.Params["url"], nil)
		if err != nil {
			return sdk.Result{}, err
		}
		resp, err := http.DefaultClient.Do(httpReq)
		if err != nil {
			return sdk.Result{}, fmt.Errorf("no answer for key %s...", secret[:14])
		}
		_ = resp.Body.Close()
		return sdk.Done("called"), nil
	case "to standard error":
		// A plugin's standard error reaches the operator's log.
		fmt.Fprintln(os.Stderr, "calling with token", secret)
		return sdk.Done("done"), nil
	case "to its log, encoded":
		// The SDK removes a value as it is from the log; not another form of it.
		sdk.Logger(ctx).Info("calling", "auth", base64.StdEncoding.EncodeToString([]byte(secret)))
		return sdk.Done("done"), nil
	case "after waiting", "after waiting, called once":
		if time.Since(req.HookStarted) < 20*time.Second {
			return sdk.Wait(10*time.Second, "waiting"), nil
		}
		return sdk.Done("key " + base64.RawURLEncoding.EncodeToString([]byte(secret))), nil
	}
	return sdk.Done("done"), nil
}

// helperEnv names, in a test process of its own, the mode of the leaky executor whose
// Conformance TestConformanceHelper runs: a failing Conformance fails that process, which
// TestConformanceFindsLeaks reads.
const helperEnv = "PLUGINTEST_CONFORMANCE_HELPER"

func TestConformanceHelper(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return // only in the process TestConformanceFindsLeaks or TestConformanceRunsDeleteTwice starts
	}
	if strict, ok := closerMode(mode); ok {
		plugintest.Conformance(t, closer{closed: &sync.Map{}, strict: strict}, nil)
		return
	}
	receiver := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(receiver.Close)
	params := map[string]string{"url": receiver.URL + "/hook"}
	secrets := map[string][]byte{"token": []byte(token + "\n")} // as Secrets often end
	opts := []plugintest.Option{plugintest.WithSecrets(secrets)}
	switch mode {
	case "by parameter":
		opts = []plugintest.Option{plugintest.WithSecretParam("credentialsSecret", secrets)}
	case "after waiting":
		opts = append(opts, plugintest.WithWaits(10))
	}
	plugintest.Conformance(t, leaky{mode: mode}, params, opts...)
}

func TestConformanceFindsLeaks(t *testing.T) {
	tests := []struct {
		mode     string
		wantFail string // in the output of the failing Conformance; empty: it passes
	}{
		{mode: "none"},
		{mode: "as it is"},
		{mode: "base64", wantFail: `Create, call 1: output "auth" carries the value of Secret key "token", base64-encoded`},
		{mode: "cut", wantFail: `Create, call 1: the message carries the value of Secret key "token", its first half`},
		{mode: "by parameter", wantFail: `the message carries the value of Secret key "credentialsSecret/token", hex-encoded`},
		{mode: "when unreachable", wantFail: "--- FAIL: TestConformanceHelper/NoSecretWhenEndpointsAreUnreachable"},
		{mode: "after waiting", wantFail: `Create, call 3: the message carries the value of Secret key "token", base64-encoded`},
		{mode: "after waiting, called once"},
		{mode: "to standard error", wantFail: `the plugin's log or standard error carries the value of Secret key "token"`},
		{mode: "to its log, encoded", wantFail: `the plugin's log or standard error carries the value of Secret key "token", base64-encoded`},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestConformanceHelper$", "-test.v", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), helperEnv+"="+tt.mode)
			out, err := cmd.CombinedOutput()
			if tt.wantFail == "" {
				require.NoError(t, err, "%s", out)
				return
			}
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "%s", out)
			assert.Contains(t, string(out), tt.wantFail)
			assert.NotContains(t, string(out), token[:8], "a failure never prints the Secret")
		})
	}
}

// closer records a made-up ticket in Create and closes it in Delete; strict fails the
// close of a ticket it closed already, as if the API's "409 already closed" were an error.
type closer struct {
	sdk.Base
	closed *sync.Map // ticket ID → true once closed
	strict bool
}

func (closer) Name() string { return "test.closer" }

func (closer) Create(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	return sdk.Done("opened").WithCreated(map[string]string{"ticket": "T-" + req.IdempotencyKey}), nil
}

func (c closer) Delete(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	id := req.Created["ticket"]
	if id == "" {
		return sdk.Done("nothing to close"), nil
	}
	if _, gone := c.closed.LoadOrStore(id, true); gone && c.strict {
		return sdk.Result{}, fmt.Errorf("close %s: 409 Conflict: the ticket is closed", id)
	}
	return sdk.Done("closed " + id), nil
}

// The helper's modes that run Conformance of a closer.
const (
	closerLenient = "a closer whose Delete takes already closed as done"
	closerStrict  = "a closer whose Delete fails on already closed"
)

// closerMode tells whether mode runs Conformance of a closer, and whether it is strict.
func closerMode(mode string) (strict, ok bool) {
	switch mode {
	case closerLenient:
		return false, true
	case closerStrict:
		return true, true
	}
	return false, false
}

func TestConformanceRunsDeleteTwice(t *testing.T) {
	tests := []struct {
		mode     string
		wantFail bool
	}{
		{mode: closerLenient},
		{mode: closerStrict, wantFail: true},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestConformanceHelper$", "-test.v", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), helperEnv+"="+tt.mode)
			out, err := cmd.CombinedOutput()
			if !tt.wantFail {
				require.NoError(t, err, "%s", out)
				return
			}
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "%s", out)
			assert.Contains(t, string(out), "--- FAIL: TestConformanceHelper/DeleteTwiceIsHarmless")
			assert.Contains(t, string(out), "Delete run again with the same record map[ticket:T-")
			assert.Contains(t, string(out), "409 Conflict")
		})
	}
}
