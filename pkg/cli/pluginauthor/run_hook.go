package pluginauthor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/plugin/client"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

// run starts the plugin, runs the hook and stops the plugin; the plugin's output goes to
// stderr. The error is the command's (the hook could not be run); what the hook did, its
// failure included, is the report's.
func (r *pluginRun) run(ctx context.Context, stderr io.Writer) (*pluginRunReport, error) {
	if r.checksum != nil {
		if err := checkSHA256(r.path, r.checksum); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	name := filepath.Base(r.path)
	logs := newPluginLog(stderr, name+": ", r.logLevel)
	defer logs.close() // after Kill: go-plugin copies the plugin's output until it exits
	c, err := client.Start(r.command(), r.clientOptions(name, logs))
	if err != nil {
		return nil, err
	}
	defer c.Kill()

	served, err := c.Describe(ctx)
	if err != nil {
		return nil, r.callError(name, "describe its executors", err)
	}
	var decl contract.Description
	names := make([]string, 0, len(served))
	found := false
	for _, e := range served {
		names = append(names, e.Name)
		if e.Name == r.executor {
			decl, found = e.Description, true
		}
	}
	if !found {
		list := strings.Join(names, ", ")
		if list == "" {
			list = "-" // as tables show nothing
		}
		return nil, fmt.Errorf("plugin %s serves no executor %q; it serves %s", name, r.executor, list)
	}

	if err := r.checkSecrets(decl.Parameters); err != nil {
		return nil, err
	}
	report := &pluginRunReport{Plugin: name, Protocol: c.Version(), Executor: r.executor, Version: decl.Version, Hook: r.hook}
	req, err := r.request(decl.Parameters, stderr)
	if err != nil {
		report.failed(err)
		return report, nil
	}
	report.Created = maps.Clone(req.Created)
	for {
		again, err := r.call(ctx, c, name, req, report)
		if err != nil {
			return nil, err
		}
		if !again {
			return report, nil
		}
		// Waiting, and --until-done: again after the time it asked, as the engine would.
		after := max(report.requeueAfter, time.Second)
		if r.noWait {
			after = 0
		}
		_, _ = fmt.Fprintf(stderr, "call %d: waiting %s: %s\n", report.Calls, after, termsafe.OneLine(report.Message, 0))
		select {
		case <-ctx.Done():
			return nil, r.callError(name, "finish hook "+string(r.hook), ctx.Err())
		case <-time.After(after):
		}
		req.State = report.State
		req.Created = maps.Clone(report.Created)
		req.Outputs[runStep] = maps.Clone(report.Outputs)
	}
}

// call makes one call of the hook and records its answer in report, with the step's
// outputs and created record merged as the engine merges them. It tells whether to call
// again (the hook waits, and --until-done); the error is the command's.
func (r *pluginRun) call(ctx context.Context, c *client.Client, name string, req *contract.Request, report *pluginRunReport) (bool, error) {
	res, err := c.Run(ctx, r.executor, req)
	if timedOut(ctx, time.Now()) {
		// --timeout passed. The plugin gets the same deadline and may answer "Timeout" a
		// moment before gRPC reports ours; either way the hook did not answer in time.
		return false, r.callError(name, "run hook "+string(r.hook), context.DeadlineExceeded)
	}
	switch client.StageOf(err) {
	case client.NotSent: // too large for the protocol: the step fails so
		report.failed(err)
		return false, nil
	case client.NoAnswer, client.NoOutcome:
		return false, r.callError(name, "run hook "+string(r.hook), err)
	}
	report.Called = true
	report.Calls++
	// The engine removes the Secrets' values from what every executor returns.
	redact := contract.NewRedactor(append([]map[string][]byte{req.Secrets}, slices.Collect(maps.Values(req.SecretParams))...)...)
	res, err = redact.Result(res), redact.Error(err)
	report.Message, report.State, report.BlockedBy = res.Message, res.State, nil
	report.Outputs = merged(req.Outputs[runStep], res.Outputs)
	report.Created = merged(req.Created, res.Created)
	for _, b := range res.BlockedBy {
		report.BlockedBy = append(report.BlockedBy, b.String())
	}
	switch {
	case err != nil:
		report.failed(err)
	case res.Done:
		report.Result, report.RequeueAfter = hookDone, ""
	default:
		report.Result, report.RequeueAfter, report.requeueAfter = hookWaiting, res.RequeueAfter.String(), res.RequeueAfter
		return r.untilDone, nil
	}
	return false, nil
}

// merged is base with more's entries added; nil when both are empty.
func merged(base, more map[string]string) map[string]string {
	if len(base)+len(more) == 0 {
		return nil
	}
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, more)
	return out
}

// command runs the plugin as the operator does (pkg/plugin/host): the executable by its
// absolute path, with no environment but go-plugin's variables (client.Start) and the
// CIDRs it may reach despite its egress policy.
func (r *pluginRun) command() *exec.Cmd {
	cmd := exec.Command(r.path) //nolint:gosec // the executable the user named, by absolute path
	if r.allowedCIDRs != "" {
		cmd.Env = []string{egress.EnvAllowedCIDRs + "=" + r.allowedCIDRs}
	}
	return cmd
}

// clientOptions are the options of the client of the plugin: go-plugin's own log is for
// an operator's log; logs shows what the plugin prints, its log lines parsed.
func (r *pluginRun) clientOptions(name string, logs *pluginLog) client.Options {
	return client.Options{
		Name:          name,
		StartTimeout:  r.timeout,
		Logger:        hclog.NewNullLogger(),
		ProcessStderr: logs.source(true),
		Stdout:        logs.source(false),
		Stderr:        logs.source(false),
	}
}

// namesSecret tells whether the engine reads the Secret that parameter param names.
func namesSecret(decl []contract.Parameter, param string) bool {
	i := slices.IndexFunc(decl, func(p contract.Parameter) bool { return p.Name == param })
	if i < 0 {
		return contract.NamesSecret(param, "")
	}
	return contract.NamesSecret(param, decl[i].Type)
}

// checkSecrets refuses a --secret for a parameter the engine reads no Secret for.
func (r *pluginRun) checkSecrets(decl []contract.Parameter) error {
	for _, param := range slices.Sorted(maps.Keys(r.secrets)) {
		if !namesSecret(decl, param) {
			return fmt.Errorf("--secret %s.*: parameter %s names no Secret (its name does not end in %s, and %s does not declare it of type %s)",
				param, param, contract.SecretSuffix, r.executor, contract.ParamSecret)
		}
	}
	return nil
}

// request is the engine's request of the hook for the parameters decl declares: parameters
// checked and with their defaults (a permanent InvalidParameter error otherwise), and the
// Secrets --secret gives, read as the engine reads them.
func (r *pluginRun) request(decl []contract.Parameter, stderr io.Writer) (*contract.Request, error) {
	params := maps.Clone(r.params)
	for _, param := range slices.Sorted(maps.Keys(r.secrets)) {
		if _, set := params[param]; !set {
			params[param] = runSecretPrefix + strings.ToLower(param)
		}
	}
	if slices.Contains(contract.TeardownHooks(), r.hook) {
		// As the engine and the SDK: a teardown is never refused for its parameters (what
		// was created under older declarations is torn down all the same).
		params = contract.WithDefaults(decl, params)
	} else {
		var err error
		if params, err = contract.CheckParams(decl, params); err != nil {
			return nil, err
		}
	}
	// As the engine's readSecrets: every parameter naming a Secret, merged by key in
	// parameter-name order.
	var secrets map[string][]byte
	var byParam map[string]map[string][]byte
	for _, param := range slices.Sorted(maps.Keys(params)) {
		if !namesSecret(decl, param) || params[param] == "" {
			continue
		}
		data := r.secrets[param]
		if data == nil {
			_, _ = fmt.Fprintf(stderr, "warning: parameter %s names the Secret %s, and no --secret %s.KEY=VALUE gives it data: the hook gets it empty\n",
				termsafe.OneLine(param, 0), termsafe.OneLine(params[param], 0), termsafe.OneLine(param, 0))
			data = map[string][]byte{}
		}
		if secrets == nil {
			secrets, byParam = map[string][]byte{}, map[string]map[string][]byte{}
		}
		maps.Copy(secrets, data)
		byParam[param] = data
	}
	return &contract.Request{
		Pipeline:           contract.PipelineRef{Namespace: runNamespace, Name: runPipeline, UID: r.uid, Generation: 1},
		ServiceAccountName: "default",
		Step:               runStep,
		Hook:               r.hook,
		Params:             params,
		Outputs:            r.outputs,
		Attempt:            r.attempt,
		IdempotencyKey:     contract.IdempotencyKey(r.uid, runStep, r.hook),
		Secrets:            secrets,
		SecretParams:       byParam,
		State:              r.state,
		Created:            r.created,
		HookStarted:        r.hookStarted,
		StepStarted:        r.stepStarted,
	}, nil
}

// timedOut tells whether ctx's deadline has passed at now. The clock decides, not only
// ctx.Err(): on a loaded machine the timer that sets Err runs late, and the plugin's answer
// to the same deadline can come back first.
func timedOut(ctx context.Context, now time.Time) bool {
	deadline, ok := ctx.Deadline()
	return ctx.Err() != nil || (ok && !now.Before(deadline))
}

// callError explains a call to the plugin that failed: the client's error names the
// plugin and what failed, and a deadline is --timeout's.
func (r *pluginRun) callError(name, what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("plugin %s did not %s within %s (--timeout)", name, what, r.timeout)
	}
	return err
}

// checkSHA256 refuses the file at path unless its SHA-256 is want. The plugin then runs
// from path (the operator runs a private copy it checked; a developer's own build is not
// swapped under them).
func checkSHA256(path string, want []byte) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("plugin: %w", err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("plugin %s: checksum: %w", path, err)
	}
	if got := h.Sum(nil); !bytes.Equal(got, want) {
		return fmt.Errorf("plugin %s: its SHA-256 is %x, not the --checksum %x: not running it", path, got, want)
	}
	return nil
}
