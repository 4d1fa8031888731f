package plugintest

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// Option tunes Conformance.
type Option func(*conformance)

type conformance struct {
	secrets      map[string][]byte
	secretParams map[string]map[string][]byte
	// maxPolls is the bound on the calls of a driven hook; 0: each hook is called once.
	maxPolls int
}

// WithSecrets hands every hook this Secret data (Request.Secrets), as the operator does
// for an executor whose credentialsSecret (or other *Secret parameter) names a Secret.
func WithSecrets(secrets map[string][]byte) Option {
	return func(c *conformance) { c.secrets = secrets }
}

// WithSecretParam hands every hook the data of the Secret that parameter param names, as
// the operator does: in Request.SecretParams[param], merged into Request.Secrets, with
// param set (to a made-up Secret name) when params does not set it.
func WithSecretParam(param string, data map[string][]byte) Option {
	return func(c *conformance) {
		if c.secretParams == nil {
			c.secretParams = map[string]map[string][]byte{}
		}
		c.secretParams[param] = data
	}
}

// WithWaits is for an executor whose hooks wait (a Result not done): Conformance drives
// each hook to its end (Drive, at most maxPolls calls; DefaultMaxPolls when maxPolls < 1)
// where it would otherwise call it once.
func WithWaits(maxPolls int) Option {
	return func(c *conformance) { c.maxPolls = max(maxPolls, 1) }
}

// secretSet is the Secret data of a call: merged by key and by parameter.
type secretSet struct {
	merged  map[string][]byte
	byParam map[string]map[string][]byte
}

// set is the secrets the options give, each changed by f (nil: as they are).
func (c *conformance) set(f func(map[string][]byte) map[string][]byte) secretSet {
	if f == nil {
		f = func(m map[string][]byte) map[string][]byte { return m }
	}
	s := secretSet{}
	if c.secrets != nil {
		s.merged = maps.Clone(f(c.secrets))
	}
	for _, param := range slices.Sorted(maps.Keys(c.secretParams)) {
		data := f(c.secretParams[param])
		if s.byParam == nil {
			s.byParam = map[string]map[string][]byte{}
		}
		s.byParam[param] = data
		if s.merged == nil {
			s.merged = map[string][]byte{}
		}
		maps.Copy(s.merged, data)
	}
	return s
}

// leaks is the finder of every value of s, named by key (and parameter).
func (s secretSet) leaks() leakFinder {
	all := maps.Clone(s.merged)
	if all == nil {
		all = map[string][]byte{}
	}
	for param, data := range s.byParam {
		for k, v := range data {
			all[param+"/"+k] = v
		}
	}
	return newLeakFinder(all)
}

// params is params with every Secret parameter set.
func (c *conformance) params(params map[string]string) map[string]string {
	out := maps.Clone(params)
	if out == nil {
		out = map[string]string{}
	}
	for param := range c.secretParams {
		if _, set := out[param]; !set {
			out[param] = "conformance-" + strings.ToLower(param)
		}
	}
	return out
}

// Conformance checks, through gRPC, what the engine relies on from every executor:
// Create twice is harmless (same outcome, no error the second time); teardown of
// something never created succeeds; the teardown hooks run twice with the record the
// creation hooks made succeed the second time too (what is already gone is done); a
// cancelled context makes every hook return promptly;
// and no answer of any hook it runs (message, outputs, state, error), nor what the
// executor logs or writes to os.Stderr (both reach the operator's log), carries a Secret
// value given to it (WithSecrets, WithSecretParam) in any form it knows (leakFinder: as it
// is, encoded, a half of it, a URL's parts), also when every endpoint is unreachable (each
// http(s) URL of a parameter or a Secret pointed at a closed port, its path, query and
// user info kept). params are valid parameters for the executor's creation hooks (it
// fails at once when they do not pass its declarations); with WithWaits each hook is
// driven to its end instead of called once.
func Conformance(t *testing.T, exec sdk.Executor, params map[string]string, opts ...Option) {
	t.Helper()
	cfg := &conformance{}
	for _, o := range opts {
		o(cfg)
	}
	name := exec.Name()
	params = cfg.params(params)
	if _, err := contract.CheckParams(exec.Describe().Parameters, params); err != nil {
		t.Fatalf("the parameters given to Conformance do not match %s's declarations: %v", name, err)
	}
	secrets := cfg.set(nil)
	leaks := secrets.leaks()
	unreachable, unreachableChanged := unreachableParams(params)
	unreachableData := cfg.set(func(m map[string][]byte) map[string][]byte {
		out, ok := unreachableData(m)
		unreachableChanged = unreachableChanged || ok
		return out
	})
	logs := &logWatch{next: newTestLog(t), leaks: leaks.and(unreachableData.leaks())}
	stopStderr := logs.captureStderr(t)
	c := serve(t, logs, exec)
	request := func(hook sdk.Hook, uid string) *sdk.Request {
		req := Request(hook, uid, params)
		req.Secrets, req.SecretParams = secrets.merged, secrets.byParam
		return req
	}

	t.Run("DescribeNamesTheExecutor", func(t *testing.T) {
		infos, err := c.Describe(t.Context())
		if err != nil || len(infos) != 1 || infos[0].GetName() != name {
			t.Fatalf("Describe = %v, %v; want one executor %q", infos, err, name)
		}
	})

	t.Run("CreateTwiceIsHarmless", func(t *testing.T) {
		for _, hook := range contract.CreationHooks() {
			first, err := cfg.call(t, c, name, hook, request(hook, "conformance-create"), leaks)
			if err != nil {
				t.Fatalf("first %s: %v", hook, err)
			}
			second, err := cfg.call(t, c, name, hook, request(hook, "conformance-create"), leaks)
			if err != nil {
				t.Fatalf("second %s: %v (hooks run at least once: a repeat must succeed)", hook, err)
			}
			if first.Done && !second.Done {
				t.Errorf("%s: the first call was done, the repeat is not: %+v", hook, second)
			}
		}
	})

	t.Run("DeleteOfSomethingNeverCreatedSucceeds", func(t *testing.T) {
		for _, hook := range contract.TeardownHooks() {
			if _, err := cfg.call(t, c, name, hook, request(hook, "conformance-never-created"), leaks); err != nil {
				t.Errorf("%s of something never created: %v", hook, err)
			}
		}
	})

	// Hooks run at least once: a crash between the teardown's remote calls and the status
	// write runs it again with the same record, when the remote system answers "already
	// gone" (404, 409); a failure then would hold the pipeline's finalizer for good.
	t.Run("DeleteTwiceIsHarmless", func(t *testing.T) {
		const uid = "conformance-delete-twice"
		// The step as the engine keeps it for its teardown: the record and outputs of the
		// creation hooks.
		created, outputs := map[string]string{}, map[string]string{}
		step := func(hook sdk.Hook) *sdk.Request {
			req := request(hook, uid)
			req.Created, req.Outputs[req.Step] = maps.Clone(created), maps.Clone(outputs)
			return req
		}
		for _, hook := range contract.CreationHooks() {
			res, err := cfg.call(t, c, name, hook, step(hook), leaks)
			if err != nil {
				t.Fatalf("%s: %v", hook, err)
			}
			maps.Copy(created, res.Created)
			maps.Copy(outputs, res.Outputs)
		}
		first := map[sdk.Hook]bool{}
		for _, run := range []string{"first", "second"} {
			for _, hook := range contract.TeardownHooks() {
				res, err := cfg.call(t, c, name, hook, step(hook), leaks)
				switch {
				case err != nil && run == "first":
					t.Fatalf("%s with the record %v: %v", hook, created, err)
				case err != nil:
					t.Errorf("%s run again with the same record %v, as after a crash before the status write: %v "+
						"(what is already gone, 404 or 409, is done: a failure here keeps the pipeline's finalizer)", hook, created, err)
				case run == "first":
					first[hook] = res.Done
				case first[hook] && !res.Done:
					t.Errorf("%s: the first call was done, the repeat is not: %+v", hook, res)
				}
			}
		}
	})

	// In process: over gRPC the client returns at cancellation whatever the executor does,
	// so this checks the executor itself.
	t.Run("CancelledContextReturnsPromptly", func(t *testing.T) {
		r := InProcess(t, exec)
		for _, hook := range Hooks {
			ctx, cancel := context.WithCancel(t.Context())
			type answer struct {
				res sdk.Result
				err error
			}
			done := make(chan answer, 1)
			go func() {
				res, err := r.Run(ctx, name, hook, request(hook, "conformance-cancel"))
				done <- answer{res, err}
			}()
			time.Sleep(10 * time.Millisecond)
			cancel()
			select {
			case a := <-done:
				reportLeaks(t, hook, 1, leaks, a.res, a.err)
			case <-time.After(5 * time.Second):
				t.Errorf("%s did not return within 5s of its context being cancelled", hook)
			}
		}
	})

	t.Run("NoSecretWhenEndpointsAreUnreachable", func(t *testing.T) {
		if !unreachableChanged {
			t.Log("nothing to check: no parameter nor Secret value is an http(s) URL")
			return
		}
		leaks := unreachableData.leaks()
		for _, hook := range Hooks {
			req := Request(hook, "conformance-unreachable", unreachable)
			req.Secrets, req.SecretParams = unreachableData.merged, unreachableData.byParam
			_, _ = cfg.call(t, c, name, hook, req, leaks) // failing is expected; leaking is not
		}
	})

	// Last: every hook above has run, and what it wrote is read to the end.
	t.Run("NoSecretInTheLogs", func(t *testing.T) {
		stopStderr()
		for _, what := range logs.findings() {
			t.Errorf("the plugin's log or standard error carries %s: a plugin's log reaches the operator's", what)
		}
	})
}

// call runs hook once, or drives it to its end with WithWaits, reporting every leak of a
// Secret on t. A driven hook's Result has the outputs and the record of all its calls, as
// the engine merges them.
func (cfg *conformance) call(t *testing.T, r Runner, name string, hook sdk.Hook, req *sdk.Request, leaks leakFinder) (sdk.Result, error) {
	t.Helper()
	if cfg.maxPolls > 0 {
		d := Drive(t, r, name, hook, req, MaxPolls(cfg.maxPolls), OnCall(func(poll int, res sdk.Result, err error) {
			reportLeaks(t, hook, poll, leaks, res, err)
		}))
		res := d.Result
		res.Outputs, res.Created = d.Outputs, d.Created
		return res, d.Err
	}
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	res, err := r.Run(ctx, name, hook, req)
	reportLeaks(t, hook, 1, leaks, res, err)
	return res, err
}

// reportLeaks fails t for every Secret form in an answer, without printing the value.
func reportLeaks(t *testing.T, hook sdk.Hook, poll int, leaks leakFinder, res sdk.Result, err error) {
	t.Helper()
	for _, leak := range leaks.find(res, err) {
		t.Errorf("%s, call %d: %s. A hook must never return a Secret, in any form: the SDK removes the values as they are, "+
			"URL-encoded and the parts of a URL, not other encodings nor parts of a value", hook, poll, leak)
	}
}
