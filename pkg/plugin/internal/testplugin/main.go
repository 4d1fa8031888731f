// Command testplugin is a plugin for the host's tests: executors that block, hang, fail
// and report the secrets they got.
package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// block: Create writes the parameter "started" (a file) and blocks until the context ends;
// with hang=true it ignores the context too.
type block struct{ sdk.Base }

func (block) Name() string { return "test.block" }

func (block) Create(ctx context.Context, req *sdk.Request) (sdk.Result, error) {
	if f := req.Params["started"]; f != "" {
		if err := os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			return sdk.Result{}, err
		}
	}
	if req.Params["hang"] == "true" {
		select {}
	}
	<-ctx.Done()
	return sdk.Result{}, ctx.Err()
}

// fail: every hook fails retryably with reason CloudBusy; Create returns a Wait.
type fail struct{ sdk.Base }

func (fail) Name() string { return "test.fail" }

func (fail) Create(context.Context, *sdk.Request) (sdk.Result, error) {
	return sdk.Wait(3*time.Second, "still working"), nil
}

func (fail) Delete(context.Context, *sdk.Request) (sdk.Result, error) {
	return sdk.Result{}, sdk.Retryable("CloudBusy", errors.New("the cloud is busy"))
}

func (fail) PostDelete(context.Context, *sdk.Request) (sdk.Result, error) {
	return sdk.Result{}, errors.New("plain failure")
}

// echo: Create outputs what it received (secret keys and sizes, never values).
type echo struct{ sdk.Base }

func (echo) Name() string { return "test.echo" }

// Plan says what Create would echo: a row per parameter, the Secret "token" in a warning
// (which the SDK must remove), and the step as an output.
func (echo) Plan(_ context.Context, req *sdk.Request) (sdk.Plan, error) {
	p := sdk.Plan{Summary: "would echo " + strconv.Itoa(len(req.Params)) + " parameters", Outputs: map[string]string{"step": req.Step}}
	for _, k := range slices.Sorted(maps.Keys(req.Params)) {
		p.Details = append(p.Details, sdk.PlanItem{Kind: "Parameter", Name: k, Action: "echo", Note: req.Params[k]})
	}
	if token := req.Secrets["token"]; token != nil {
		p.Warnings = append(p.Warnings, "the token is "+string(token))
	}
	return p, nil
}

func (echo) Create(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	var keys []string
	for k, v := range req.Secrets {
		keys = append(keys, k+"="+strconv.Itoa(len(v)))
	}
	slices.Sort(keys)
	return sdk.DoneWithOutputs("echo", map[string]string{
		"secrets":  strings.Join(keys, ","),
		"pipeline": req.Pipeline.Namespace + "/" + req.Pipeline.Name + "/" + req.Pipeline.UID + "/" + strconv.FormatInt(req.Pipeline.Generation, 10),
		"step":     req.Step, "hook": string(req.Hook), "attempt": strconv.Itoa(int(req.Attempt)),
		"key": req.IdempotencyKey, "earlier": req.Outputs["first"]["x"],
	}), nil
}

// hostile: Create answers what a careless or malicious executor could, by parameter mode:
// text that is not UTF-8 (a receiver's "HTTP/1.1 500 \xff\xfe", an error body cut in a
// character), results over the protocol's size limit, and an answer inflated in memory.
type hostile struct{ sdk.Base }

func (hostile) Name() string { return "test.hostile" }

func (hostile) Create(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	switch req.Params["mode"] {
	case "invalid-message":
		return sdk.Done("HTTP/1.1 500 \xff\xfe"), nil
	case "invalid-error":
		return sdk.Result{}, sdk.Retryable("ReceiverFailed", errors.New("HTTP/1.1 500 \xff\xfe"))
	case "cut-character":
		return sdk.Result{}, errors.New("Ungültig"[:3])
	case "invalid-outputs":
		return sdk.DoneWithOutputs("done", map[string]string{"key\xff": "value\xfe"}), nil
	case "huge-result":
		return sdk.DoneWithOutputs("done", map[string]string{"blob": strings.Repeat("x", 5<<20)}), nil
	case "huge-error":
		return sdk.Result{}, errors.New(strings.Repeat("x", 5<<20))
	case "inflate":
		return inflate(req.Params["mib"])
	}
	return sdk.Done("nothing hostile"), nil
}

// inflate holds mib MiB at once, every page written, as a plugin decompressing a huge
// answer would.
func inflate(mib string) (sdk.Result, error) {
	n, err := strconv.Atoi(mib)
	if err != nil {
		return sdk.Result{}, sdk.Permanent("InvalidParameter", fmt.Errorf("mib: %w", err))
	}
	chunks := make([][]byte, n)
	for i := range chunks {
		chunks[i] = make([]byte, 1<<20)
		for j := 0; j < len(chunks[i]); j += 4096 {
			chunks[i][j] = 1
		}
	}
	return sdk.Done("inflated " + strconv.Itoa(len(chunks)) + " MiB"), nil
}

// environ: Create outputs the names of the environment variables the plugin sees and, with
// the parameter "show", the value of that one.
type environ struct{ sdk.Base }

func (environ) Name() string { return "test.environ" }

func (environ) Create(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	var names []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	slices.Sort(names)
	out := map[string]string{"names": strings.Join(names, ",")}
	if show := req.Params["show"]; show != "" {
		out["value"] = os.Getenv(show)
	}
	return sdk.DoneWithOutputs("environ", out), nil
}

// logs: Create writes a plain line to stderr and one through sdk.Logger that holds the
// Secret "token", and a line to stdout.
type logs struct{ sdk.Base }

func (logs) Name() string { return "test.logs" }

func (logs) Create(ctx context.Context, req *sdk.Request) (sdk.Result, error) {
	fmt.Fprintln(os.Stderr, "plain line from step", req.Step)
	fmt.Println("stdout line from step", req.Step)
	sdk.Logger(ctx).Info("structured line", "token", string(req.Secrets["token"]))
	return sdk.Done("logged"), nil
}

func main() {
	// A crash while starting, once: the file named by STEPWISE_TEST_CRASH_ONCE is removed
	// and the process dies before the handshake, as one killed at that moment would.
	if marker := os.Getenv("STEPWISE_TEST_CRASH_ONCE"); marker != "" {
		if err := os.Remove(marker); err == nil {
			os.Exit(3)
		}
	}
	sdk.Serve(block{}, fail{}, echo{}, hostile{}, environ{}, logs{})
}
