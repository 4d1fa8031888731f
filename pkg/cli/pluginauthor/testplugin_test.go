package pluginauthor_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe/termsafetest"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

// TestMain makes this test binary a plugin when go-plugin starts it: go-plugin puts its
// magic cookie in the environment (and, with SkipHostEnv, little else). The tests of
// `plugin run` run it as a real plugin process, next to the example plugin they build.
func TestMain(m *testing.M) {
	if os.Getenv(proto.Handshake.MagicCookieKey) == proto.Handshake.MagicCookieValue {
		// go-plugin points os.Stderr at a stream of its own; this is the process's.
		stderr := os.Stderr
		sdk.Serve(echo{stderr: stderr}, waiter{}, failer{}, sleeper{}, ticket{})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// hostile is text a plugin can print or answer with to drive the terminal.
const hostile = termsafetest.Hostile

// echo answers with what its request holds, and prints hostile text.
type echo struct {
	sdk.Base
	stderr io.Writer
}

func (echo) Name() string { return "test.echo" }

func (echo) Describe() sdk.Description {
	return sdk.Description{Version: "v9.9.9", Parameters: []sdk.Parameter{
		{Name: "name", Type: sdk.ParamString, Required: true},
		{Name: "count", Type: sdk.ParamInt, Default: "1"},
		{Name: "tokenSecret", Type: sdk.ParamSecret},
		{Name: "note", Type: sdk.ParamString},
	}}
}

func (e echo) Create(ctx context.Context, req *sdk.Request) (sdk.Result, error) {
	_, _ = fmt.Fprintln(e.stderr, "raw line"+hostile)
	sdk.Logger(ctx).Info("echoing", "who", req.String("name"), "hostile", hostile)
	sdk.Logger(ctx).Debug("not shown at info")
	keys := func(m map[string][]byte) string { return strings.Join(slices.Sorted(maps.Keys(m)), ",") }
	out := map[string]string{
		"pipeline":       req.Pipeline.Namespace + "/" + req.Pipeline.Name,
		"uid":            req.Pipeline.UID,
		"step":           req.Step,
		"hook":           string(req.Hook),
		"attempt":        fmt.Sprint(req.Attempt),
		"idempotencyKey": req.IdempotencyKey,
		"serviceAccount": req.ServiceAccountName,
		"started":        fmt.Sprint(time.Since(req.HookStarted) < time.Minute),
		"name":           req.String("name"),
		"count":          fmt.Sprint(req.Int("count")),
		"tokenSecret":    req.String("tokenSecret"),
		"secrets":        keys(req.Secrets),
		"secretParam":    keys(req.Secret("tokenSecret")),
		"state":          fmt.Sprint(req.State),
		"env":            envNames(),
		"note":           req.String("note"),
	}
	// A hook must never return a Secret's value; the engine removes it if it does.
	return sdk.DoneWithOutputs("token "+string(req.Secrets["token"]), out), nil
}

// envNames are the names of the process's environment variables.
func envNames() string {
	var names []string
	for _, v := range os.Environ() {
		name, _, _ := strings.Cut(v, "=")
		names = append(names, name)
	}
	return strings.Join(names, ",")
}

// waiter waits once, keeping state, and is done when called with it.
type waiter struct{ sdk.Base }

func (waiter) Name() string { return "test.wait" }

func (waiter) Create(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	if req.State["operation"] == "op-42" {
		return sdk.Done("operation op-42 finished"), nil
	}
	return sdk.Wait(10*time.Second, "operation op-42 started").WithState(map[string]string{"operation": "op-42"}).
		Blocked(sdk.Blocker{Kind: "Operation", Name: "op-42"}, sdk.Blocker{Kind: "PodDisruptionBudget", Namespace: "apps", Name: "web"}), nil
}

// failer fails, retryably, with hostile text.
type failer struct{ sdk.Base }

func (failer) Name() string { return "test.fail" }

func (failer) Delete(context.Context, *sdk.Request) (sdk.Result, error) {
	return sdk.Result{}, sdk.Retryable("Flaky", errors.New("boom"+hostile))
}

// sleeper never answers before its context ends.
type sleeper struct{ sdk.Base }

func (sleeper) Name() string { return "test.sleep" }

func (sleeper) Create(ctx context.Context, _ *sdk.Request) (sdk.Result, error) {
	<-ctx.Done()
	return sdk.Result{}, ctx.Err()
}

// ticket opens a ticket on its first call, recording it, is done on the next, and closes
// what was recorded in Delete; its outputs say what the engine gave it.
type ticket struct{ sdk.Base }

func (ticket) Name() string { return "test.ticket" }

func (ticket) Describe() sdk.Description {
	return sdk.Description{Parameters: []sdk.Parameter{{Name: "summary", Type: sdk.ParamString, Required: true}}}
}

func (ticket) Create(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	if req.Created["ticket"] == "" {
		return sdk.Wait(time.Millisecond, "opened T-1").WithCreated(map[string]string{"ticket": "T-1"}).
			WithState(map[string]string{"polls": "1"}), nil
	}
	return sdk.DoneWithOutputs("approved", map[string]string{
		"ticketID":    req.Created["ticket"],
		"state":       fmt.Sprint(req.State),
		"attempt":     fmt.Sprint(req.Attempt),
		"hookStarted": req.HookStarted.UTC().Format(time.RFC3339),
		"stepStarted": req.StepStarted.UTC().Format(time.RFC3339),
		"allowed":     os.Getenv(egress.EnvAllowedCIDRs),
	}), nil
}

func (ticket) Delete(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	id := req.Created["ticket"]
	if id == "" {
		return sdk.Result{}, sdk.Permanent("NothingRecorded", errors.New("no ticket recorded"))
	}
	return sdk.DoneWithOutputs("closed "+id, map[string]string{"closed": id, "ownOutput": req.Outputs["step"]["ticketID"]}), nil
}

// self is this test binary, which TestMain makes a plugin.
func self(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	return exe
}
