// Package host runs out-of-process executor plugins with go-plugin: it finds the
// stepwise-plugin-* executables of a directory, checks each against a SHA-256 checksum
// file, starts it once (gRPC over mutual TLS), asks which executors it serves and
// registers a TaskExecutor for each. A plugin that dies is restarted on the next call.
package host

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
)

// Prefix is how the executables of plugins are named: stepwise-plugin-<name>.
const Prefix = "stepwise-plugin-"

// ReasonPluginUnavailable is the (retryable) reason of a hook whose plugin died or could
// not be started.
const ReasonPluginUnavailable = "PluginUnavailable"

// Options configure a Host.
type Options struct {
	// Dir holds the plugin executables. Empty: no plugins.
	Dir string
	// Checksums is a sha256sum-format file listing every plugin; default Dir/SHA256SUMS.
	Checksums string
	// StartTimeout bounds a plugin's start and handshake; default 10s.
	StartTimeout time.Duration
	// DescribeTimeout bounds the Describe call; default 10s.
	DescribeTimeout time.Duration
	// MaxRestartBackoff bounds the wait between restarts of a plugin that keeps dying;
	// default 30s.
	MaxRestartBackoff time.Duration
}

// Host owns the plugin processes.
type Host struct {
	opts    Options
	logger  klog.Logger
	mu      sync.Mutex
	plugins []*process
	closed  bool
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

// Start discovers, verifies and starts the plugins and returns the executors they serve,
// and the plugins it refused with why. A plugin that fails its checksum, its handshake or
// Describe is logged and skipped: it never stops the others or the operator. An error is
// returned only when the directory cannot be read.
func (h *Host) Start(ctx context.Context) ([]executor.TaskExecutor, map[string]string, error) {
	refused := map[string]string{}
	if h.opts.Dir == "" {
		return nil, refused, nil
	}
	dir, err := filepath.Abs(h.opts.Dir)
	if err != nil {
		return nil, refused, fmt.Errorf("plugin directory %q: %w", h.opts.Dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, refused, fmt.Errorf("read plugin directory: %w", err)
	}
	var paths []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), Prefix) || e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
			h.logger.Info("Ignoring a plugin file that is not an executable", "path", filepath.Join(dir, e.Name()))
			continue
		}
		paths = append(paths, filepath.Join(dir, e.Name()))
	}
	if len(paths) == 0 {
		h.logger.Info("No plugins found", "dir", dir)
		return nil, refused, nil
	}
	sums, sumsErr := readChecksums(h.opts.Checksums)
	var executors []executor.TaskExecutor
	seen := map[string]string{}
	for _, path := range paths {
		name := filepath.Base(path)
		logger := h.logger.WithValues("plugin", name, "path", path)
		refuse := func(err error, msg string, kv ...any) {
			logger.Error(err, "Plugin refused: "+msg, kv...)
			if err != nil {
				msg += ": " + err.Error()
			}
			refused[name] = msg
		}
		if sumsErr != nil {
			refuse(sumsErr, "no checksum file to verify it against", "checksums", h.opts.Checksums)
			continue
		}
		sum, ok := sums[name]
		if !ok {
			refuse(nil, "it is not listed in the checksum file "+h.opts.Checksums)
			continue
		}
		p := &process{name: name, path: path, checksum: sum, logger: logger, host: h}
		infos, err := p.describe(ctx)
		if err != nil {
			p.kill()
			refuse(err, "it did not start")
			continue
		}
		var names []string
		for _, info := range infos {
			if other, dup := seen[info.GetName()]; dup || info.GetName() == "" {
				logger.Error(nil, "Executor ignored: no name, or its name is served by another plugin", "executor", info.GetName(), "other", other)
				continue
			}
			seen[info.GetName()] = name
			names = append(names, info.GetName())
			executors = append(executors, &pluginExecutor{proc: p, info: info})
		}
		logger.Info("Plugin started", "executors", names)
		h.mu.Lock()
		h.plugins = append(h.plugins, p)
		h.mu.Unlock()
	}
	return executors, refused, nil
}

// Load starts the plugins and registers their executors in the registry, and the plugins
// it refused, so that a step naming one of their executors says why it cannot run.
func (h *Host) Load(ctx context.Context, registry *executor.Registry) error {
	executors, refused, err := h.Start(ctx)
	if err != nil {
		return err
	}
	for name, why := range refused {
		registry.Refuse(name, why)
	}
	for _, e := range executors {
		if err := registry.Register(e); err != nil {
			h.logger.Error(err, "Plugin executor not registered", "executor", e.Name())
		}
	}
	return nil
}

// PIDs returns the process IDs of the running plugins, by executable name.
func (h *Host) PIDs() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for _, p := range h.plugins {
		if pid := p.pid(); pid != 0 {
			out[p.name] = pid
		}
	}
	return out
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
}

func (h *Host) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// readChecksums reads a sha256sum-format file: "<hex>  <file name>" a line.
func readChecksums(path string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	sums := map[string][]byte{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"<sha256>  <file>\"", path, n)
		}
		sum, err := hex.DecodeString(fields[0])
		if err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("%s:%d: %q is not a SHA-256 in hex", path, n, fields[0])
		}
		sums[filepath.Base(strings.TrimPrefix(fields[1], "*"))] = sum
	}
	return sums, sc.Err()
}

// process is one plugin executable and, while it runs, its go-plugin client.
type process struct {
	name, path string
	checksum   []byte
	logger     klog.Logger
	host       *Host

	mu        sync.Mutex
	client    *plugin.Client
	rpc       proto.ExecutorClient
	failures  int // consecutive deaths or failed starts
	nextStart time.Time
}

// conn returns a connection to the running plugin, starting it first when it is not
// running (a restart waits out a bounded backoff when the plugin keeps dying).
func (p *process) conn() (proto.ExecutorClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.host.isClosed() {
		return nil, executor.Retryable(ReasonPluginUnavailable, fmt.Errorf("plugin %s: the operator is shutting down", p.name))
	}
	if p.client != nil && !p.client.Exited() {
		return p.rpc, nil
	}
	if p.client != nil {
		p.client.Kill()
		p.client, p.rpc = nil, nil
		p.failed()
		p.logger.Info("Plugin process exited; restarting it")
	}
	if wait := time.Until(p.nextStart); wait > 0 {
		return nil, executor.Retryable(ReasonPluginUnavailable, fmt.Errorf("plugin %s died; restarting it in %s", p.name, wait.Round(time.Millisecond)))
	}
	if err := p.start(); err != nil {
		p.failed()
		return nil, executor.Retryable(ReasonPluginUnavailable, err)
	}
	return p.rpc, nil
}

func (p *process) failed() {
	p.failures++
	backoff := time.Duration(0)
	if p.failures > 1 {
		backoff = min(500*time.Millisecond<<min(p.failures-2, 10), p.host.opts.MaxRestartBackoff)
	}
	p.nextStart = time.Now().Add(backoff)
}

// start runs the executable (by absolute path, no shell) after go-plugin checked its
// checksum, over gRPC with automatic mutual TLS. p.mu is held.
func (p *process) start() error {
	cmd := exec.Command(p.path) //nolint:gosec // an absolute path from the plugin directory, checked against its SHA-256
	orphanGuard(cmd)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  proto.Handshake,
		Plugins:          proto.PluginSet(nil),
		Cmd:              cmd,
		SecureConfig:     &plugin.SecureConfig{Checksum: p.checksum, Hash: sha256.New()},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		StartTimeout:     p.host.opts.StartTimeout,
		Logger:           newLogger(p.logger),
	})
	rpcClient, err := client.Client()
	if err != nil {
		client.Kill()
		if errors.Is(err, plugin.ErrChecksumsDoNotMatch) {
			return fmt.Errorf("plugin %s: its SHA-256 does not match the checksum file: %w", p.name, err)
		}
		return fmt.Errorf("plugin %s: start and handshake failed (is it a Stepwise plugin?): %w", p.name, err)
	}
	raw, err := rpcClient.Dispense(proto.PluginName)
	if err != nil {
		client.Kill()
		return fmt.Errorf("plugin %s: %w", p.name, err)
	}
	p.client, p.rpc = client, raw.(proto.ExecutorClient)
	return nil
}

func (p *process) describe(ctx context.Context) ([]*proto.ExecutorInfo, error) {
	rpc, err := p.conn()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.host.opts.DescribeTimeout)
	defer cancel()
	resp, err := rpc.Describe(ctx, &proto.DescribeRequest{})
	if err != nil {
		return nil, fmt.Errorf("plugin %s: describe: %w", p.name, err)
	}
	p.mu.Lock()
	p.failures = 0
	p.mu.Unlock()
	return resp.GetExecutors(), nil
}

// broken handles a failed call: when the plugin died (or its connection did), the
// process is killed so that the next call starts a new one.
func (p *process) broken(rpc proto.ExecutorClient) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rpc != rpc || p.client == nil {
		return // already restarted by another call
	}
	p.client.Kill()
	p.client, p.rpc = nil, nil
	p.failed()
}

func (p *process) ok() {
	p.mu.Lock()
	p.failures = 0
	p.mu.Unlock()
}

func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client == nil || p.client.Exited() {
		return 0
	}
	if rc := p.client.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

func (p *process) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client != nil {
		p.client.Kill()
		p.client, p.rpc = nil, nil
	}
}
