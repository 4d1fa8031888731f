// Package host owns the lifecycle of out-of-process executor plugins: it finds the
// stepwise-plugin-* executables of its directories (the image's, and the one plugins
// installed from their own images are copied to), checks each against the SHA-256
// checksum file of its directory, starts a verified copy once under its memory limit and environment, asks which
// executors it serves and registers a TaskExecutor for each. A plugin that dies is
// restarted on the next call. The calls themselves, and their errors, are
// pkg/plugin/client's.
package host

import (
	"context"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/trace"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/plugin/client"
	"github.com/stepwise-dev/stepwise/pkg/plugin/layout"
	"github.com/stepwise-dev/stepwise/pkg/plugin/signature"
	"github.com/stepwise-dev/stepwise/pkg/tracing"
)

// Prefix is how the executables of plugins are named: stepwise-plugin-<name>.
const Prefix = layout.Prefix

// Options configure a Host.
type Options struct {
	// Dir holds the plugin executables of the operator's image. Empty: none.
	Dir string
	// Checksums is a sha256sum-format file listing every plugin of Dir; default
	// Dir/SHA256SUMS.
	Checksums string
	// InstalledDir holds plugins installed from their own images (copied there by the
	// installer's init containers), discovered, verified and started as those of Dir.
	// Empty: none. A plugin whose name is in Dir too is refused: Dir's runs.
	InstalledDir string
	// InstalledChecksums is the sha256sum-format file, written by the installer and not by
	// the plugin images, that the plugins of InstalledDir are verified against; they are
	// never verified against Checksums, nor the plugins of Dir against this. Given with
	// InstalledDir, and only with it: it has no default, so that a checksum file an image
	// copies into InstalledDir is never read.
	InstalledChecksums string
	// InstalledPolicies say who must have signed a plugin of InstalledDir, by plugin name
	// (stepwise-plugin-NAME's NAME): such a plugin runs only when the Sigstore bundle next
	// to it (layout.SignaturePath) passes its policy, checked by Verifier on the bytes that
	// run, before they run. A plugin of InstalledDir needs a line in InstalledChecksums,
	// a policy here, or both (then both must pass).
	InstalledPolicies signature.Policies
	// Verifier checks the signatures of InstalledPolicies; required with them.
	Verifier *signature.Verifier
	// StartTimeout bounds a plugin's start and handshake; default 10s.
	StartTimeout time.Duration
	// DescribeTimeout bounds the Describe call; default 10s.
	DescribeTimeout time.Duration
	// MaxRestartBackoff bounds the wait between restarts of a plugin that keeps dying;
	// default 30s.
	MaxRestartBackoff time.Duration
	// RunDir is where the host makes its private directory of the verified copies that
	// plugins run from; default the system's temporary directory.
	RunDir string
	// Env is the whole environment of every plugin process ("NAME=value"), beside what
	// go-plugin adds for its handshake: plugins never inherit the operator's.
	Env []string
	// EnvFor adds to Env for one plugin, by plugin name (the executable's, as in Reattach):
	// a variable in both takes EnvFor's value there. A name no plugin has is logged.
	EnvFor map[string][]string
	// MemoryLimit bounds, in bytes, the memory each plugin process it starts may map (on
	// Linux, RLIMIT_DATA; GOMEMLIMIT below it everywhere); 0: no bound. A plugin over it
	// dies and is restarted on the next call, as after any crash.
	MemoryLimit int64
	// Reattach names plugins a developer started under a debugger (sdk.Serve with
	// STEPWISE_PLUGIN_DEBUG=1), by plugin name: the host connects to them instead of
	// starting the executable, checks no checksum, and never kills them. For development
	// only.
	Reattach map[string]*plugin.ReattachConfig
	// Restarts, when set, counts the plugin processes that died and are started again.
	Restarts RestartRecorder
	// TracerProvider, when set, traces the calls into plugins and carries their trace
	// context over.
	TracerProvider trace.TracerProvider
	// TraceCollector, when it has an endpoint, is the operator's OTLP collector: the
	// plugins export their own spans to it through a relay of the host (tracerelay.go),
	// never connecting to it themselves.
	TraceCollector tracing.Options
}

// RestartRecorder counts plugin processes that died, by plugin and cause
// (RestartExited, RestartOutOfMemory).
type RestartRecorder interface {
	PluginRestarted(plugin, cause string)
}

// Causes of a plugin's restart.
const (
	RestartExited      = "exited"
	RestartOutOfMemory = "out_of_memory"
)

// Host owns the plugin processes.
type Host struct {
	opts    Options
	logger  klog.Logger
	mu      sync.Mutex
	plugins []*process
	closed  bool
	// runDir holds the verified copies plugins run from (verify.go); runLock is its lock,
	// held while the host runs.
	runDir  string
	runLock *os.File
	// relay carries the plugins' spans to Options.TraceCollector; nil when it has none.
	relay *traceRelay
}

// New returns a Host that has started nothing yet.
func New(logger klog.Logger, opts Options) *Host {
	if opts.Checksums == "" && opts.Dir != "" {
		opts.Checksums = filepath.Join(opts.Dir, "SHA256SUMS")
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 10 * time.Second
	}
	if opts.DescribeTimeout == 0 {
		opts.DescribeTimeout = 10 * time.Second
	}
	if opts.MaxRestartBackoff == 0 {
		opts.MaxRestartBackoff = 30 * time.Second
	}
	return &Host{opts: opts, logger: logger.WithName("plugins")}
}

// source is a directory of plugins and the checksum file its plugins, and only its, are
// verified against.
type source struct {
	dir, checksums string
	// installed: the directory of plugins installed from their own images.
	installed bool
}

// sources are the directories plugins are found in, the image's (Dir) first: a plugin of
// a later one whose name an earlier one has is refused.
func (h *Host) sources() ([]source, error) {
	if (h.opts.InstalledDir == "") != (h.opts.InstalledChecksums == "") {
		return nil, fmt.Errorf("installed plugins: a directory (%q) and the checksum file of its plugins (%q) go together", h.opts.InstalledDir, h.opts.InstalledChecksums)
	}
	if len(h.opts.InstalledPolicies) > 0 && (h.opts.InstalledDir == "" || h.opts.Verifier == nil) {
		return nil, errors.New("installed plugins: signature policies need the directory of installed plugins and a verifier")
	}
	var sources []source
	for _, src := range []source{{dir: h.opts.Dir, checksums: h.opts.Checksums}, {dir: h.opts.InstalledDir, checksums: h.opts.InstalledChecksums, installed: true}} {
		if src.dir == "" {
			continue
		}
		dir, err := filepath.Abs(src.dir)
		if err != nil {
			return nil, fmt.Errorf("plugin directory %q: %w", src.dir, err)
		}
		if slices.ContainsFunc(sources, func(other source) bool { return other.dir == dir }) {
			return nil, fmt.Errorf("plugin directory %s is given twice: the directory of installed plugins must be another than the image's", dir)
		}
		sources = append(sources, source{dir: dir, checksums: src.checksums, installed: src.installed})
	}
	return sources, nil
}

// found is a plugin executable and the source it was found in.
type found struct {
	src  source
	path string
}

// discover lists the plugin executables of every source, in the order of the sources. An
// error is returned only when a directory cannot be read.
func (h *Host) discover(sources []source) ([]found, error) {
	var all []found
	for _, src := range sources {
		paths, err := h.findPlugins(src.dir, src.installed)
		if err != nil {
			return nil, err
		}
		if len(paths) == 0 {
			h.logger.Info("No plugins found", "dir", src.dir)
		}
		for _, path := range paths {
			all = append(all, found{src: src, path: path})
		}
	}
	return all, nil
}

// start discovers, verifies and starts the plugins and returns the executors they serve,
// and the plugins it refused with why. A plugin that fails its checksum, its handshake or
// Describe, or whose name a plugin of the image has, is logged and skipped: it never stops
// the others or the operator. An error is returned only when the options are inconsistent
// or a directory cannot be read.
func (h *Host) start(ctx context.Context) ([]executor.TaskExecutor, map[string]executor.Refusal, error) {
	refused := map[string]executor.Refusal{}
	sources, err := h.sources()
	if err != nil {
		return nil, refused, err
	}
	if len(sources) == 0 && len(h.opts.Reattach) == 0 {
		return nil, refused, nil
	}
	plugins, err := h.discover(sources)
	if err != nil {
		return nil, refused, err
	}
	if len(plugins) == 0 && len(h.opts.Reattach) == 0 {
		return nil, refused, nil
	}
	h.warnUnknownEnvFor(sources, plugins)
	h.startTraceRelay()
	var executors []executor.TaskExecutor
	seen := map[string]string{}
	add := func(p *process) {
		served, err := h.describeStarting(ctx, p)
		if err != nil {
			p.kill()
			p.logger.Error(err, "Plugin refused: it did not start")
			// The registry puts the plugin's name before why it was refused: once is enough.
			why := err
			if pe := (*pluginError)(nil); errors.As(err, &pe) && pe.name == p.name {
				why = pe.err
			}
			refused[p.name] = executor.Refusal{Plugin: p.name, Reason: refusalReason(err), Message: "it did not start: " + why.Error()}
			return
		}
		var names []string
		for _, described := range served {
			if other, dup := seen[described.Name]; dup || described.Name == "" {
				p.logger.Error(nil, "Executor ignored: no name, or its name is served by another plugin", "executor", described.Name, "other", other)
				continue
			}
			seen[described.Name] = p.name
			names = append(names, described.Name)
			executors = append(executors, newPluginExecutor(p, described))
		}
		p.logger.Info("Plugin started", "executors", names)
		h.mu.Lock()
		h.plugins = append(h.plugins, p)
		h.mu.Unlock()
	}
	type checksums struct {
		sums map[string][]byte
		err  error
	}
	sumsOf := map[source]checksums{} // read once, when the source has plugins
	firstDir := map[string]string{}  // plugin name -> the directory of the first found
	for _, f := range plugins {
		name := filepath.Base(f.path)
		logger := h.logger.WithValues("plugin", name, "path", f.path)
		if _, debug := h.opts.Reattach[name]; debug {
			continue // served by the developer's process, below
		}
		refuse := func(reason v1alpha1.PluginRefusalReason, err error, msg string, kv ...any) {
			logger.Error(err, "Plugin refused: "+msg, kv...)
			if err != nil {
				msg += ": " + err.Error()
			}
			if earlier, ok := refused[name]; ok { // the image's plugin of that name was refused too
				msg = earlier.Message + "; " + msg
			}
			refused[name] = executor.Refusal{Plugin: name, Reason: reason, Message: msg}
		}
		if dir, dup := firstDir[name]; dup {
			refuse(v1alpha1.PluginDuplicate, nil, "a plugin of that name is in the image already, in "+dir+", so "+f.path+" is not started")
			continue
		}
		firstDir[name] = f.src.dir
		sums, read := sumsOf[f.src]
		if !read {
			sums.sums, sums.err = readChecksums(f.src.checksums)
			sumsOf[f.src] = sums
		}
		if sums.err != nil {
			refuse(v1alpha1.PluginNotVerifiable, sums.err, "no checksum file to verify it against", "checksums", f.src.checksums)
			continue
		}
		sum, listed := sums.sums[name]
		policy := h.policyOf(f.src, name)
		switch {
		case !listed && policy == nil && f.src.installed && len(h.opts.InstalledPolicies) > 0:
			refuse(v1alpha1.PluginNotVerifiable, nil, "it is neither listed in the checksum file "+f.src.checksums+" nor given a signature policy")
			continue
		case !listed && policy == nil:
			refuse(v1alpha1.PluginNotVerifiable, nil, "it is not listed in the checksum file "+f.src.checksums)
			continue
		}
		add(&process{name: name, path: f.path, checksums: f.src.checksums, checksum: sum, policy: policy, logger: logger, host: h})
	}
	for _, name := range slices.Sorted(maps.Keys(h.opts.Reattach)) {
		logger := h.logger.WithValues("plugin", name, "reattach", h.opts.Reattach[name].Addr.String())
		logger.Info("Connecting to a plugin started by hand, for debugging: its checksum is not verified")
		add(&process{name: name, reattach: h.opts.Reattach[name], logger: logger, host: h})
	}
	return executors, refused, nil
}

// startTraceRelay starts the relay of the plugins' spans when the operator traces. Traces
// are never worth not serving: without it, the plugins run untraced.
func (h *Host) startTraceRelay() {
	if h.opts.TraceCollector.Endpoint == "" {
		return
	}
	dir, err := h.privateDir()
	if err == nil {
		var relay *traceRelay
		if relay, err = startTraceRelay(h.logger, dir, h.opts.TraceCollector); err == nil {
			h.mu.Lock()
			h.relay = relay
			h.mu.Unlock()
			return
		}
	}
	h.logger.Error(err, "Plugins run untraced: no relay to the trace collector")
}

// traceEnv is what a plugin is given to export its spans: none without a relay.
func (h *Host) traceEnv() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.relay == nil {
		return nil
	}
	return h.relay.env()
}

// policyOf is the signature policy of plugin name (its executable's name) of src: only
// installed plugins have one.
func (h *Host) policyOf(src source, name string) *signature.Policy {
	if !src.installed {
		return nil
	}
	policy, ok := h.opts.InstalledPolicies[strings.TrimPrefix(name, Prefix)]
	if !ok {
		return nil
	}
	return &policy
}

// warnUnknownEnvFor logs the names of Options.EnvFor that no plugin has: a typo there
// gives the plugin meant less than asked (fewer allowed CIDRs: its connections are
// refused, saying so), never more, so the operator starts anyway.
func (h *Host) warnUnknownEnvFor(sources []source, plugins []found) {
	var dirs []string
	for _, src := range sources {
		dirs = append(dirs, src.dir)
	}
	for _, name := range slices.Sorted(maps.Keys(h.opts.EnvFor)) {
		_, reattached := h.opts.Reattach[name]
		if !reattached && !slices.ContainsFunc(plugins, func(f found) bool { return filepath.Base(f.path) == name }) {
			h.logger.Error(nil, "Environment given for a plugin that is in no plugin directory: it applies to no plugin", "plugin", name, "dirs", dirs)
		}
	}
}

// refusalReason is the typed reason of a plugin that did not start with err.
func refusalReason(err error) v1alpha1.PluginRefusalReason {
	var checksumErr *checksumError
	var signatureErr *signature.RefusedError
	switch {
	case errors.As(err, &signatureErr):
		return signatureErr.Reason
	case errors.As(err, &checksumErr):
		return v1alpha1.PluginChecksumMismatch
	default:
		return v1alpha1.PluginDidNotStart
	}
}

// startAttempts bounds how often a plugin is started before it is refused: a process that
// died while starting (killed, or out of memory) is started again; one that fails its
// checksum is refused at once.
const startAttempts = 3

// describeStarting starts p and asks what it serves, trying again after a short wait when
// the start failed for another reason than its checksum.
func (h *Host) describeStarting(ctx context.Context, p *process) ([]client.Executor, error) {
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		var served []client.Executor
		if served, err = p.describe(ctx); err == nil {
			return served, nil
		}
		var checksumErr *checksumError
		var signatureErr *signature.RefusedError
		if errors.As(err, &checksumErr) || errors.As(err, &signatureErr) || attempt == startAttempts {
			break
		}
		p.logger.Info("Plugin did not start; trying again", "attempt", attempt, "err", err)
		p.kill()
		p.mu.Lock()
		p.nextStart = time.Time{} // this wait replaces the restart backoff
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		}
	}
	return nil, err
}

// Load starts the plugins and registers their executors in the registry, and the plugins
// it refused, so that a step naming one of their executors says why it cannot run.
func (h *Host) Load(ctx context.Context, registry *executor.Registry) error {
	executors, refused, err := h.start(ctx)
	if err != nil {
		return err
	}
	for _, refusal := range refused {
		registry.Refuse(refusal)
	}
	for _, e := range executors {
		if err := registry.Register(e); err != nil {
			h.logger.Error(err, "Plugin executor not registered", "executor", e.Name())
		}
	}
	return nil
}

// Close kills every plugin process; later calls fail.
func (h *Host) Close() {
	h.mu.Lock()
	h.closed = true
	plugins := slices.Clone(h.plugins)
	h.mu.Unlock()
	for _, p := range plugins {
		p.kill()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.relay != nil {
		h.relay.Close()
		h.relay = nil
	}
	if h.runDir != "" {
		if err := os.RemoveAll(h.runDir); err != nil {
			h.logger.Error(err, "Removing the plugins' private directory", "dir", h.runDir)
		}
		_ = h.runLock.Close()
		h.runDir, h.runLock = "", nil
	}
}

func (h *Host) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}
