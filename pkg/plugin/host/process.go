package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-plugin"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
)

// process is one plugin executable and, while it runs, its go-plugin client.
type process struct {
	name, path string
	checksum   []byte
	// exe is the verified copy the running process was started from.
	exe string
	// reattach, for a plugin a developer started, is how to reach it; nil for the others.
	reattach *plugin.ReattachConfig
	logger   klog.Logger
	host     *Host

	mu     sync.Mutex
	client *plugin.Client
	rpc    proto.ExecutorClient
	// oom tells whether the running process said it ran out of memory as it died.
	oom *oomWatch
	// death is why the last process died, when it is known: the calls its death failed say it.
	death string
	// version is the protocol version the running process speaks.
	version   int
	failures  int // consecutive deaths or failed starts
	nextStart time.Time
}

// conn returns a connection to the running plugin, starting it first when it is not
// running (a restart waits out a bounded backoff when the plugin keeps dying).
func (p *process) conn() (proto.ExecutorClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.host.isClosed() {
		return nil, contract.Retryable(ReasonPluginUnavailable, fmt.Errorf("plugin %s: the operator is shutting down", p.name))
	}
	if p.client != nil && !p.client.Exited() {
		return p.rpc, nil
	}
	if p.client != nil {
		p.drop()
		p.logger.Info("Plugin process exited; restarting it", "why", p.death)
	}
	if wait := time.Until(p.nextStart); wait > 0 {
		return nil, contract.Retryable(ReasonPluginUnavailable, fmt.Errorf("plugin %s died; restarting it in %s", p.name, wait.Round(time.Millisecond)))
	}
	if err := p.start(); err != nil {
		p.failed()
		return nil, contract.Retryable(ReasonPluginUnavailable, err)
	}
	return p.rpc, nil
}

// drop forgets the client of a process that died or whose connection broke, noting why it
// died when that is known, so that the next call starts a new one. p.mu is held.
func (p *process) drop() {
	p.death = ""
	if p.oom != nil && p.oom.seen.Load() {
		p.death = "out of memory: over its limit of " + resource.NewQuantity(p.host.opts.MemoryLimit, resource.BinarySI).String()
	}
	p.client.Kill()
	p.client, p.rpc, p.oom = nil, nil, nil
	p.failed()
}

func (p *process) failed() {
	p.failures++
	backoff := time.Duration(0)
	if p.failures > 1 {
		backoff = min(500*time.Millisecond<<min(p.failures-2, 10), p.host.opts.MaxRestartBackoff)
	}
	p.nextStart = time.Now().Add(backoff)
}

// start runs a verified copy of the executable (by absolute path, no shell) over gRPC
// with automatic mutual TLS. p.mu is held.
func (p *process) start() error {
	if p.reattach != nil {
		return p.attach()
	}
	exe, err := p.host.verifiedCopy(p)
	if err != nil {
		return err
	}
	if p.exe != "" {
		_ = os.Remove(p.exe) // the copy the previous process ran from
	}
	p.exe = exe
	var client *plugin.Client
	var oom *oomWatch
	var rpcClient plugin.ClientProtocol
	for attempt := 1; ; attempt++ {
		client, oom = p.newClient(exe)
		rpcClient, err = client.Client()
		// A copy just written can be busy for a moment when another goroutine forks while
		// its file was open (golang/go#22315).
		if err == nil || !errors.Is(err, syscall.ETXTBSY) || attempt == 3 {
			break
		}
		client.Kill()
		time.Sleep(time.Duration(attempt) * 50 * time.Millisecond)
	}
	if err != nil {
		client.Kill()
		return fmt.Errorf("plugin %s: start and handshake failed (is it a Stepwise plugin?): %w", p.name, err)
	}
	// As soon as Go lets us: a limit cannot be set between fork and exec, so the plugin
	// has run its handshake without it. It never serves a call without it.
	if err := limitMemory(client, p.host.opts.MemoryLimit); err != nil {
		client.Kill()
		return fmt.Errorf("plugin %s: %w", p.name, err)
	}
	raw, err := rpcClient.Dispense(proto.PluginName)
	if err != nil {
		client.Kill()
		return fmt.Errorf("plugin %s: %w", p.name, err)
	}
	p.client, p.rpc, p.oom, p.version = client, raw.(proto.ExecutorClient), oom, client.NegotiatedVersion()
	p.logger.V(1).Info("Plugin started", "protocolVersion", p.version)
	return nil
}

// attach connects to a plugin a developer started. p.mu is held.
func (p *process) attach() error {
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: proto.Handshake,
		// A reattached client dispenses from Plugins, never VersionedPlugins.
		Plugins:          proto.VersionedPlugins(nil)[p.reattach.ProtocolVersion],
		Reattach:         p.reattach,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           newLogger(p.logger),
	})
	rpcClient, err := client.Client()
	if err != nil {
		return fmt.Errorf("plugin %s: reattach to %s: %w", p.name, p.reattach.Addr, err)
	}
	raw, err := rpcClient.Dispense(proto.PluginName)
	if err != nil {
		return fmt.Errorf("plugin %s: %w", p.name, err)
	}
	p.client, p.rpc, p.version = client, raw.(proto.ExecutorClient), p.reattach.ProtocolVersion
	return nil
}

// newClient is go-plugin's client of the executable at exe, and what watches its stderr
// for a death out of memory.
func (p *process) newClient(exe string) (*plugin.Client, *oomWatch) {
	cmd := exec.Command(exe) //nolint:gosec // the host's private copy of a plugin, checked against its SHA-256
	// Options.Env, EnvFor and the soft memory limit only, never the operator's: exec.Cmd
	// keeps the last value of a variable set twice, so EnvFor's wins over Env's.
	cmd.Env = slices.Concat(p.host.opts.Env, p.host.opts.EnvFor[p.name], memoryEnv(p.host.opts.MemoryLimit))
	cfg := proto.ClientConfig(cmd)
	cfg.StartTimeout = p.host.opts.StartTimeout
	cfg.Logger = newLogger(p.logger)
	// go-plugin's server sends what a plugin writes to os.Stdout and os.Stderr after it
	// started serving (a hook's fmt.Fprintln) over its stdio stream, not its stderr:
	// logged, not dropped.
	cfg.SyncStdout, cfg.SyncStderr = newLineLogger(p.logger, "stdout"), newLineLogger(p.logger, "stderr")
	// The runtime's dying words go to the process's own stderr, which go-plugin reads.
	oom := &oomWatch{}
	cfg.Stderr = oom
	return plugin.NewClient(cfg), oom
}

// limitMemory sets the hard memory limit of the process a client started.
func limitMemory(client *plugin.Client, limit int64) error {
	if limit <= 0 {
		return nil
	}
	rc := client.ReattachConfig()
	if rc == nil || rc.Pid == 0 {
		return errors.New("set the memory limit: no process ID")
	}
	return limitProcessMemory(rc.Pid, limit)
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

// exitGrace is how long a failed call waits for go-plugin to notice that the process
// exited: a killed plugin breaks its connection a moment before it is reaped.
const exitGrace = time.Second

// exited reports whether the process behind rpc is gone (then it is replaced on the next
// call), and why when that is known, waiting up to exitGrace for its exit to be noticed.
func (p *process) exited(rpc proto.ExecutorClient) (died bool, why string) {
	deadline := time.Now().Add(exitGrace)
	for {
		p.mu.Lock()
		client, current, death := p.client, p.rpc == rpc, p.death
		p.mu.Unlock()
		if !current || client == nil {
			return true, death // another call saw it die and replaced it
		}
		if client.Exited() {
			p.broken(rpc)
			p.mu.Lock()
			defer p.mu.Unlock()
			return true, p.death
		}
		if time.Now().After(deadline) {
			return false, ""
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// broken handles a failed call: when the plugin died (or its connection did), the
// process is killed so that the next call starts a new one.
func (p *process) broken(rpc proto.ExecutorClient) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rpc != rpc || p.client == nil {
		return // already restarted by another call
	}
	p.drop()
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
		p.client, p.rpc, p.oom = nil, nil, nil
	}
}

// protocolVersion is the protocol version the running process speaks.
func (p *process) protocolVersion() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.version
}
