package pluginauthor

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
	"github.com/stepwise-dev/stepwise/pkg/contract"
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

func newRunCommand(streams genericiooptions.IOStreams) *cobra.Command {
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

The request is for step "` + runStep + `" of pipeline ` + runNamespace + `/` + runPipeline + `, attempt 1 (--attempt), the hook
started now (--hook-started) and the step with it (--step-started). A teardown hook
(PreDelete, Delete, PostDelete) is never refused for its parameters, as the engine never
refuses one; give it what Create left with --created KEY=VALUE (the step's created record)
and --step-output KEY=VALUE (the step's outputs). --request FILE gives any of these, and the
outputs of earlier steps, in YAML or JSON; flags add to it. --secret PARAM.KEY=VALUE puts KEY in the Secret that parameter PARAM names (its name
ends in Secret, or the executor declares it of type secret); PARAM names a made-up Secret
unless -p sets it. Other users of the machine can see a command line: use test
credentials. A hook that waits prints the state it keeps: give it back with --state
KEY=VALUE to make its next call (the idempotency key stays the same unless --uid changes
it), or give --until-done to have it called again after the time it asks (at once with
--no-wait), with its state and records, until it is done or fails, within --timeout. Plugins may not connect to
loopback or private addresses unless allowed: --allowed-cidrs 127.0.0.0/8 lets one reach a
fake API on this machine, as the operator's --plugin-allowed-cidrs does.

What the plugin writes to its standard output and error is shown on standard error,
escaped, and the lines it logs (sdk.Logger) from --log-level up.

Exit codes: 0 the hook is done; 1 it could not be run (bad arguments, a plugin that does
not start or answer, a wrong checksum, --timeout); 2 the hook failed, or its parameters
are invalid; 3 the hook is waiting: call it again after the time shown.`,
		Example: `  # Build a plugin and run the Create hook of one of its executors.
  go build -o bin/plugins/stepwise-plugin-example ./plugins/example
  kubectl stepwise plugin run bin/plugins/stepwise-plugin-example example.greet Create -p name=Ada

  # Only the binary you mean to run: refuse it unless its SHA-256 is this one.
  kubectl stepwise plugin run bin/plugins/stepwise-plugin-example example.greet create -p name=Ada \
    --checksum "$(sha256sum bin/plugins/stepwise-plugin-example | cut -d' ' -f1)"

  # A hook that waits, run to the end against a fake API on loopback; then its teardown,
  # given what Create recorded.
  kubectl stepwise plugin run bin/plugins/stepwise-plugin-ticket ticket.approval Create \
    -p url=http://127.0.0.1:8089 -p summary="retire worker-7" --allowed-cidrs 127.0.0.0/8 --until-done --timeout 2m
  kubectl stepwise plugin run bin/plugins/stepwise-plugin-ticket ticket.approval Delete \
    -p url=http://127.0.0.1:8089 -p summary="retire worker-7" --allowed-cidrs 127.0.0.0/8 --created ticket=T-1

  # A Secret for the parameter tokenSecret, and the state of a hook's last wait, as JSON.
  kubectl stepwise plugin run bin/plugins/stepwise-plugin-acme acme.deploy Create -p env=dev \
    --secret tokenSecret.token=test-token --state operation=op-42 -o json`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := termsafe.CheckFormat(output); err != nil {
				return err
			}
			r, err := flags.parse(args)
			if err != nil {
				return err
			}
			report, err := r.run(cmd.Context(), streams.ErrOut)
			if err != nil {
				return err
			}
			if output != "" {
				data, err := termsafe.Encode(report, output)
				if err != nil {
					return fmt.Errorf("encode the hook's answer: %w", err)
				}
				if _, err := streams.Out.Write(data); err != nil {
					return fmt.Errorf("write the hook's answer: %w", err)
				}
			} else if err := printPluginRun(streams.Out, report); err != nil {
				return err
			}
			switch report.Result {
			case hookFailed:
				return ErrHookFailed
			case hookWaiting:
				return ErrHookWaiting
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&flags.params, "param", "p", nil, "A parameter of the step, NAME=VALUE; repeat for each.")
	f.StringArrayVar(&flags.secrets, "secret", nil,
		"A key of the Secret parameter PARAM names, PARAM.KEY=VALUE; repeat for each.")
	f.StringArrayVar(&flags.state, "state", nil, "An entry of the state the hook kept at its last wait, KEY=VALUE; repeat for each.")
	f.StringArrayVar(&flags.created, "created", nil,
		"An entry of the step's created record, KEY=VALUE, as an earlier hook recorded it (a teardown gets it); repeat for each.")
	f.StringArrayVar(&flags.stepOutputs, "step-output", nil, "An output the step has so far, KEY=VALUE (a teardown gets them); repeat for each.")
	f.Int32Var(&flags.attempt, "attempt", 0, "The attempt of the hook, from 1 (default 1, or --request's).")
	f.StringVar(&flags.hookStarted, "hook-started", "", "When this attempt of the hook was first called: how long ago (25m) or an RFC 3339 time. Default: now.")
	f.StringVar(&flags.stepStarted, "step-started", "", "When the step's run started: how long ago (2h) or an RFC 3339 time. Default: the hook's start.")
	f.StringVar(&flags.requestFile, "request", "", "A YAML or JSON file with more of the request: params, state, created, outputs (by step), attempt, hookStarted, stepStarted. Flags add to it.")
	f.StringVar(&flags.allowedCIDRs, "allowed-cidrs", "",
		"Comma-separated CIDRs the plugin may connect to despite its egress policy, as the operator's --plugin-allowed-cidrs (127.0.0.0/8 for a fake API on loopback).")
	f.BoolVar(&flags.untilDone, "until-done", false,
		"Call a hook that waits again, after the time it asks, with its state and records, until it is done or fails (within --timeout), as the engine would.")
	f.BoolVar(&flags.noWait, "no-wait", false,
		"With --until-done: call a waiting hook again at once, not after the time it asks (a fake API that answers at once).")
	f.StringVar(&flags.checksum, "checksum", "", "The SHA-256 BINARY must have, in hex: refuse to run it otherwise.")
	f.StringVar(&flags.uid, "uid", runUID, "UID of the made-up pipeline, part of the hook's idempotency key.")
	f.DurationVar(&flags.timeout, "timeout", 30*time.Second, "How long the plugin has to start, describe itself and answer the hook.")
	f.StringVar(&flags.logLevel, "log-level", "info", "The lowest level of the plugin's log lines shown: trace, debug, info, warn, error or off.")
	f.StringVarP(&output, "output", "o", "", "Output format: json or yaml. Default: a short summary.")
	return cmd
}

// pluginRunFlags are the flags of `plugin run` as given.
type pluginRunFlags struct {
	params, secrets, state, created, stepOutputs       []string
	checksum, uid, logLevel, requestFile, allowedCIDRs string
	hookStarted, stepStarted                           string
	attempt                                            int32
	timeout                                            time.Duration
	untilDone, noWait                                  bool
}

// pluginRun is what `plugin run` was asked to do, checked.
type pluginRun struct {
	// path is BINARY's absolute path.
	path     string
	executor string
	hook     contract.Hook
	params   map[string]string
	// secrets holds the data --secret gives, by parameter, then key.
	secrets map[string]map[string][]byte
	state   map[string]string
	// created is the step's created record; outputs the outputs by step, this one's
	// ("step") included.
	created                  map[string]string
	outputs                  map[string]map[string]string
	attempt                  int32
	hookStarted, stepStarted time.Time
	checksum                 []byte
	uid                      string
	// allowedCIDRs is what the plugin may reach despite its egress policy.
	allowedCIDRs string
	untilDone    bool
	// noWait calls a waiting hook again at once (--no-wait).
	noWait   bool
	timeout  time.Duration
	logLevel hclog.Level
}

// parse checks the arguments and flags before anything runs.
func (f *pluginRunFlags) parse(args []string) (*pluginRun, error) {
	r := &pluginRun{executor: args[1], uid: f.uid, timeout: f.timeout, untilDone: f.untilDone, noWait: f.noWait}
	if f.noWait && !f.untilDone {
		return nil, errors.New("--no-wait goes with --until-done")
	}
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
	if err := f.parseInput(r, time.Now()); err != nil {
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
