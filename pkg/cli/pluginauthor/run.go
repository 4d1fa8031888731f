package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/plugin/client"
)

// The made-up step a hook run by `plugin run` belongs to.
const (
	runNamespace = "local"
	runPipeline  = "plugin-run"
	runStep      = "step"
	// runUID is the pipeline's UID unless --uid gives another: fixed, so that the calls of
	// a hook made one after the other share their idempotency key, as the engine's do.
	runUID = "00000000-0000-0000-0000-000000000000"
	// runSecretPrefix starts the made-up name of a Secret --secret gives.
	runSecretPrefix = "plugin-run-"
)

// What `plugin run` saw of the hook (pluginRunReport.Result).
const (
	hookDone    = "Done"
	hookWaiting = "Waiting"
	hookFailed  = "Failed"
)

func newPluginRunCommand(o *options) *cobra.Command {
	var (
		flags  pluginRunFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "run BINARY EXECUTOR HOOK [-p NAME=VALUE]... [--secret PARAM.KEY=VALUE]... [--state KEY=VALUE]...",
		Short: "Run one hook of a plugin's executor, as the operator would",
		Long: `Start the plugin executable BINARY as the operator does, run one hook of its executor
EXECUTOR with a request like the engine's, print what the hook answered and stop the plugin.
No cluster is needed.

As the operator, it runs BINARY by its path (never looked up in $PATH) with no environment
but go-plugin's own variables, over gRPC with mutual TLS, after checking its SHA-256 when
--checksum is given. It asks the plugin to describe its executors, and checks the
parameters against EXECUTOR's declarations: a required one missing, or a value not of its
type, fails as the step would (InvalidParameter) without calling the hook; the hook gets
the parameters with the defaults of those not set. HOOK is PreCreate, Create, PostCreate,
PreDelete, Delete or PostDelete, in any case. The values of the Secrets are removed from
the answer, as the engine removes them.

The request is for step "` + runStep + `" of pipeline ` + runNamespace + `/` + runPipeline + `, attempt 1, the hook started
now. --secret PARAM.KEY=VALUE puts KEY in the Secret that parameter PARAM names (its name
ends in Secret, or the executor declares it of type secret); PARAM names a made-up Secret
unless -p sets it. Other users of the machine can see a command line: use test
credentials. A hook that waits prints the state it keeps: give it back with --state
KEY=VALUE to make its next call (the idempotency key stays the same unless --uid changes
it).

What the plugin writes to its standard output and error is shown on standard error,
escaped, and the lines it logs (sdk.Logger) from --log-level up.

Exit codes: 0 the hook is done; 1 it could not be run (bad arguments, a plugin that does
not start or answer, a wrong checksum, --timeout); 2 the hook failed, or its parameters
are invalid; 3 the hook is waiting: call it again after the time shown.`,
		Example: `  # Build a plugin and run the Create hook of one of its executors.
  go build -o bin/stepwise-plugin-example ./plugins/example
  kubectl stepwise plugin run bin/stepwise-plugin-example example.greet Create -p name=Ada

  # Only the binary you mean to run: refuse it unless its SHA-256 is this one.
  kubectl stepwise plugin run bin/stepwise-plugin-example example.greet create -p name=Ada \
    --checksum "$(sha256sum bin/stepwise-plugin-example | cut -d' ' -f1)"

  # A Secret for the parameter tokenSecret, and the state of a hook's last wait, as JSON.
  kubectl stepwise plugin run bin/stepwise-plugin-acme acme.deploy Create -p env=dev \
    --secret tokenSecret.token=test-token --state operation=op-42 -o json`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			r, err := flags.parse(args)
			if err != nil {
				return err
			}
			report, err := r.run(cmd.Context(), o.streams.ErrOut)
			if err != nil {
				return err
			}
			if output != "" {
				data, err := encodeOutput(report, output)
				if err != nil {
					return fmt.Errorf("encode the hook's answer: %w", err)
				}
				if _, err := o.streams.Out.Write(data); err != nil {
					return err
				}
			} else if err := printPluginRun(o.streams.Out, report); err != nil {
				return err
			}
			switch report.Result {
			case hookFailed:
				return errHookFailed
			case hookWaiting:
				return errHookWaiting
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&flags.params, "param", "p", nil, "A parameter of the step, NAME=VALUE; repeat for each.")
	f.StringArrayVar(&flags.secrets, "secret", nil,
		"A key of the Secret parameter PARAM names, PARAM.KEY=VALUE; repeat for each.")
	f.StringArrayVar(&flags.state, "state", nil, "An entry of the state the hook kept at its last wait, KEY=VALUE; repeat for each.")
	f.StringVar(&flags.checksum, "checksum", "", "The SHA-256 BINARY must have, in hex: refuse to run it otherwise.")
	f.StringVar(&flags.uid, "uid", runUID, "UID of the made-up pipeline, part of the hook's idempotency key.")
	f.DurationVar(&flags.timeout, "timeout", 30*time.Second, "How long the plugin has to start, describe itself and answer the hook.")
	f.StringVar(&flags.logLevel, "log-level", "info", "The lowest level of the plugin's log lines shown: trace, debug, info, warn, error or off.")
	f.StringVarP(&output, "output", "o", "", "Output format: json or yaml. Default: a short summary.")
	return cmd
}

// pluginRunFlags are the flags of `plugin run` as given.
type pluginRunFlags struct {
	params, secrets, state  []string
	checksum, uid, logLevel string
	timeout                 time.Duration
}

// pluginRun is what `plugin run` was asked to do, checked.
type pluginRun struct {
	// path is BINARY's absolute path.
	path     string
	executor string
	hook     contract.Hook
	params   map[string]string
	// secrets holds the data --secret gives, by parameter, then key.
	secrets  map[string]map[string][]byte
	state    map[string]string
	checksum []byte
	uid      string
	timeout  time.Duration
	logLevel hclog.Level
}

// parse checks the arguments and flags before anything runs.
func (f *pluginRunFlags) parse(args []string) (*pluginRun, error) {
	r := &pluginRun{executor: args[1], uid: f.uid, timeout: f.timeout}
	var err error
	if r.path, err = filepath.Abs(args[0]); err != nil {
		return nil, fmt.Errorf("plugin %s: %w", args[0], err)
	}
	info, err := os.Stat(r.path)
	if err != nil {
		return nil, fmt.Errorf("plugin: %w", err)
	}
	if !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		return nil, fmt.Errorf("plugin %s is not an executable file", r.path)
	}
	if r.hook, err = parseHook(args[2]); err != nil {
		return nil, err
	}
	if r.params, err = parsePairs("parameter", f.params); err != nil {
		return nil, err
	}
	if r.state, err = parsePairs("state entry", f.state); err != nil {
		return nil, err
	}
	if r.secrets, err = parseSecrets(f.secrets); err != nil {
		return nil, err
	}
	if f.checksum != "" {
		if r.checksum, err = hex.DecodeString(strings.TrimPrefix(f.checksum, "sha256:")); err != nil || len(r.checksum) != sha256.Size {
			return nil, fmt.Errorf("--checksum %q is not a SHA-256 in hex (64 digits)", f.checksum)
		}
	}
	if r.timeout <= 0 {
		return nil, errors.New("--timeout must be more than 0")
	}
	if r.logLevel = hclog.LevelFromString(f.logLevel); r.logLevel == hclog.NoLevel {
		return nil, fmt.Errorf("--log-level %q is not trace, debug, info, warn, error or off", f.logLevel)
	}
	return r, nil
}

// parseHook is the hook named s, in any case.
func parseHook(s string) (contract.Hook, error) {
	hooks := contract.AllHooks()
	for _, h := range hooks {
		if strings.EqualFold(s, string(h)) {
			return h, nil
		}
	}
	names := make([]string, len(hooks))
	for i, h := range hooks {
		names[i] = string(h)
	}
	return "", fmt.Errorf("hook %q is not one of %s", s, strings.Join(names, ", "))
}

// parseSecrets reads PARAM.KEY=VALUE pairs. Errors never quote a value: it is a Secret's.
func parseSecrets(pairs []string) (map[string]map[string][]byte, error) {
	out := map[string]map[string][]byte{}
	for i, pair := range pairs {
		ref, value, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("--secret number %d is not PARAM.KEY=VALUE", i+1)
		}
		// A parameter's name has no dot; a Secret's key may (tls.crt).
		param, key, ok := strings.Cut(ref, ".")
		if !ok || param == "" || key == "" {
			return nil, fmt.Errorf("--secret %q=... is not PARAM.KEY=VALUE", ref)
		}
		if errs := validation.IsConfigMapKey(key); len(errs) > 0 {
			return nil, fmt.Errorf("--secret %q=...: %q is not a Secret key: %s", ref, key, strings.Join(errs, "; "))
		}
		if _, dup := out[param][key]; dup {
			return nil, fmt.Errorf("--secret %s is given twice", ref)
		}
		if out[param] == nil {
			out[param] = map[string][]byte{}
		}
		out[param][key] = []byte(value)
	}
	return out, nil
}

// pluginRunReport is what `plugin run` prints: what the hook answered.
type pluginRunReport struct {
	// Plugin is the executable's file name.
	Plugin string `json:"plugin"`
	// Protocol is the plugin protocol version the plugin and the CLI agreed on.
	Protocol int    `json:"protocol"`
	Executor string `json:"executor"`
	// Version is the executor's, as it describes itself.
	Version string        `json:"version,omitempty"`
	Hook    contract.Hook `json:"hook"`
	// Called is false when the hook was not called: the engine would have refused the
	// request first (Error says why).
	Called bool `json:"called"`
	// Result is Done, Waiting or Failed.
	Result string `json:"result"`
	// RequeueAfter is when a waiting hook wants to be called again, e.g. "10s".
	RequeueAfter string            `json:"requeueAfter,omitempty"`
	Message      string            `json:"message,omitempty"`
	Outputs      map[string]string `json:"outputs,omitempty"`
	State        map[string]string `json:"state,omitempty"`
	Error        *hookError        `json:"error,omitempty"`
}

// hookError is a failed hook, as the step's condition would show it.
type hookError struct {
	Reason string `json:"reason"`
	// Permanent errors fail the step at once; the engine retries the others with backoff.
	Permanent bool   `json:"permanent"`
	Message   string `json:"message"`
}

// failed records err as the hook's failure, with the reason the step's condition would
// show.
func (r *pluginRunReport) failed(err error) {
	r.Result = hookFailed
	r.Error = &hookError{Reason: executor.ReasonFor(err), Permanent: contract.IsPermanent(err), Message: err.Error()}
}

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
		return nil, fmt.Errorf("plugin %s serves no executor %q; it serves %s", name, r.executor, orDash(strings.Join(names, ", ")))
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
	res, err := c.Run(ctx, r.executor, req)
	switch client.StageOf(err) {
	case client.NotSent: // too large for the protocol: the step fails so
		report.failed(err)
		return report, nil
	case client.NoAnswer, client.NoOutcome:
		return nil, r.callError(name, "run hook "+string(r.hook), err)
	}
	report.Called = true
	// The engine removes the Secrets' values from what every executor returns.
	redact := contract.NewRedactor(append([]map[string][]byte{req.Secrets}, slices.Collect(maps.Values(req.SecretParams))...)...)
	res, err = redact.Result(res), redact.Error(err)
	switch {
	case err != nil:
		report.failed(err)
	case res.Done:
		report.Result = hookDone
	default:
		report.Result, report.RequeueAfter = hookWaiting, res.RequeueAfter.String()
	}
	report.Message, report.Outputs, report.State = res.Message, res.Outputs, res.State
	return report, nil
}

// command runs the plugin as the operator does (pkg/plugin/host): the executable by its
// absolute path, with no environment but go-plugin's variables (client.Start).
func (r *pluginRun) command() *exec.Cmd {
	return exec.Command(r.path) //nolint:gosec // the executable the user named, by absolute path
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
	params, err := contract.CheckParams(decl, params)
	if err != nil {
		return nil, err
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
				oneLine(param, 0), oneLine(params[param], 0), oneLine(param, 0))
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
		Outputs:            map[string]map[string]string{},
		Attempt:            1,
		IdempotencyKey:     contract.IdempotencyKey(r.uid, runStep, r.hook),
		Secrets:            secrets,
		SecretParams:       byParam,
		State:              r.state,
		HookStarted:        time.Now(),
	}, nil
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

// printPluginRun writes the report as a short block, every value from the plugin through
// oneLine.
func printPluginRun(w io.Writer, r *pluginRunReport) error {
	tw := printers.GetNewTabWriter(w)
	_, _ = fmt.Fprintf(tw, "Plugin:\t%s (protocol %d)\n", oneLine(r.Plugin, 0), r.Protocol)
	executor := oneLine(r.Executor, 0)
	if r.Version != "" {
		executor += " " + oneLine(r.Version, 0)
	}
	_, _ = fmt.Fprintf(tw, "Executor:\t%s\n", executor)
	hook := string(r.Hook)
	if !r.Called {
		hook += " (not called)"
	}
	_, _ = fmt.Fprintf(tw, "Hook:\t%s\n", hook)
	switch r.Result {
	case hookWaiting:
		_, _ = fmt.Fprintf(tw, "Result:\tWaiting: call it again in %s\n", r.RequeueAfter)
	case hookFailed:
		kind := "retryable: the engine calls it again, with backoff"
		if r.Error.Permanent {
			kind = "permanent: the step fails at once"
		}
		_, _ = fmt.Fprintf(tw, "Result:\tFailed: %s (%s)\n", oneLine(r.Error.Reason, 0), kind)
		_, _ = fmt.Fprintf(tw, "Error:\t%s\n", oneLine(r.Error.Message, 0))
	default:
		_, _ = fmt.Fprintf(tw, "Result:\t%s\n", r.Result)
	}
	if r.Message != "" {
		_, _ = fmt.Fprintf(tw, "Message:\t%s\n", oneLine(r.Message, 0))
	}
	for _, block := range []struct {
		title  string
		values map[string]string
	}{{"Outputs", r.Outputs}, {"State", r.State}} {
		if len(block.values) == 0 {
			continue
		}
		_, _ = fmt.Fprintf(tw, "%s:\n", block.title)
		for _, k := range slices.Sorted(maps.Keys(block.values)) {
			_, _ = fmt.Fprintf(tw, "  %s\t%s\n", oneLine(k, 0), oneLine(block.values[k], 0))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the hook's answer: %w", err)
	}
	return nil
}

// pluginLog writes what a plugin process prints to the CLI's standard error, a line at a
// time, each prefixed with the plugin's name and escaped: a plugin's output must not drive
// the terminal. Lines of its original standard error that are hclog JSON (sdk.Logger's,
// go-plugin's) are shown as client.LogLine reads them, from the given level up. It drops
// what comes after close: go-plugin's goroutine copying the plugin's output can outlive
// Kill.
type pluginLog struct {
	mu      sync.Mutex
	w       io.Writer
	prefix  string
	level   hclog.Level
	closed  bool
	sources []*client.LineWriter
}

func newPluginLog(w io.Writer, prefix string, level hclog.Level) *pluginLog {
	return &pluginLog{w: w, prefix: prefix, level: level}
}

// source is a writer of one stream of the plugin's output; parse says its lines may be
// hclog JSON (a line cut for its length is shown as it is).
func (l *pluginLog) source(parse bool) io.Writer {
	s := client.NewLineWriter(func(line []byte, cut bool) { l.writeLine(line, parse && !cut) })
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sources = append(l.sources, s)
	return s
}

// close writes what is left of unfinished lines and drops what comes later.
func (l *pluginLog) close() {
	l.mu.Lock()
	sources := slices.Clone(l.sources)
	l.mu.Unlock()
	for _, s := range sources {
		s.Flush()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
}

// writeLine writes one line, unless it is a log line below l's level or l is closed.
func (l *pluginLog) writeLine(line []byte, parse bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	text := string(line)
	if parse {
		if entry, ok := client.ParseLogLine(line); ok {
			if l.level == hclog.Off || entry.Level < l.level {
				return
			}
			text = entry.String()
		}
	}
	_, _ = io.WriteString(l.w, l.prefix+escapeLine(strings.TrimSuffix(text, "\r"))+"\n")
}
