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
	"github.com/stepwise-dev/stepwise/pkg/plugin/client"
	"github.com/stepwise-dev/stepwise/pkg/plugin/signature"
)

// process is one plugin executable and, while it runs, the client of its process. The
// client makes the calls and maps their errors; the process starts it, replaces it when
// it dies and bounds how often.
type process struct {
	name, path string
	// checksums is the checksum file of the plugin's directory, checksum what it lists
	// (nil: not listed, and policy says who signed it).
	checksums string
	checksum  []byte
	// policy, for an installed plugin, is who must have signed it; nil: no signature is
	// checked.
	policy *signature.Policy
	// exe is the verified copy the running process was started from.
	exe string
	// reattach, for a plugin a developer started, is how to reach it; nil for the others.
	reattach *plugin.ReattachConfig
	logger   klog.Logger
	host     *Host

	mu     sync.Mutex
	client *client.Client
	// oom tells whether the running process said it ran out of memory as it died.
	oom *oomWatch
	// death is why the last process died, when it is known: the log of its restart says it.
	death     string
	failures  int // consecutive deaths or failed starts
	nextStart time.Time
}

// conn returns the client of the running plugin, starting it first when it is not
// running (a restart waits out a bounded backoff when the plugin keeps dying).
func (p *process) conn() (*client.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.host.isClosed() {
		return nil, contract.Retryable(client.ReasonPluginUnavailable, fmt.Errorf("plugin %s: the operator is shutting down", p.name))
	}
	if p.client != nil && !p.client.Exited() {
		return p.client, nil
	}
	if p.client != nil {
		p.drop()
		p.logger.Info("Plugin process exited; restarting it", "why", p.death)
	}
	if wait := time.Until(p.nextStart); wait > 0 {
		return nil, contract.Retryable(client.ReasonPluginUnavailable, fmt.Errorf("plugin %s died; restarting it in %s", p.name, wait.Round(time.Millisecond)))
	}
	if err := p.start(); err != nil {
		p.failed()
		return nil, contract.Retryable(client.ReasonPluginUnavailable, err)
	}
	return p.client, nil
}

// drop forgets the client of a process that died or whose connection broke, noting why it
// died when that is known, so that the next call starts a new one. p.mu is held.
func (p *process) drop() {
	p.death = deathCause(p.oom, p.host.opts.MemoryLimit)
	if r := p.host.opts.Restarts; r != nil {
		cause := RestartExited
		if p.oom != nil && p.oom.seen.Load() {
			cause = RestartOutOfMemory
		}
		r.PluginRestarted(p.name, cause)
	}
	p.client.Kill()
	p.client, p.oom = nil, nil
	p.failed()
}

// deathCause is why a process whose stderr oom watched died, when it is known.
func deathCause(oom *oomWatch, memoryLimit int64) string {
	if oom != nil && oom.seen.Load() {
		return "out of memory: over its limit of " + resource.NewQuantity(memoryLimit, resource.BinarySI).String()
	}
	return ""
}

func (p *process) failed() {
	p.failures++
	backoff := time.Duration(0)
	if p.failures > 1 {
		backoff = min(500*time.Millisecond<<min(p.failures-2, 10), p.host.opts.MaxRestartBackoff)
	}
	p.nextStart = time.Now().Add(backoff)
}

// start runs a verified copy of the executable (by absolute path, no shell) under its
// memory limit. p.mu is held.
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
	var c *client.Client
	var oom *oomWatch
	for attempt := 1; ; attempt++ {
		oom = &oomWatch{}
		c, err = client.Start(p.command(exe), p.clientOptions(oom))
		// A copy just written can be busy for a moment when another goroutine forks while
		// its file was open (golang/go#22315).
		if err == nil || !errors.Is(err, syscall.ETXTBSY) || attempt == 3 {
			break
		}
		time.Sleep(time.Duration(attempt) * 50 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	// As soon as Go lets us: a limit cannot be set between fork and exec, so the plugin
	// has run its handshake without it. It never serves a call without it.
	if err := limitMemory(c.PID(), p.host.opts.MemoryLimit); err != nil {
		c.Kill()
		return &pluginError{name: p.name, err: err}
	}
	p.client, p.oom = c, oom
	p.logger.V(1).Info("Plugin started", "protocolVersion", c.Version())
	return nil
}

// attach connects to a plugin a developer started. p.mu is held.
func (p *process) attach() error {
	c, err := client.Attach(p.reattach, client.Options{Name: p.name, Logger: newLogger(p.logger), Restarts: true, TracerProvider: p.host.opts.TracerProvider})
	if err != nil {
		return err
	}
	p.client = c
	return nil
}

// command runs the verified copy exe with Options.Env, EnvFor, the trace relay's endpoint
// and the soft memory limit only, never the operator's environment: exec.Cmd keeps the last value of a variable set
// twice, so EnvFor's wins over Env's.
func (p *process) command(exe string) *exec.Cmd {
	cmd := exec.Command(exe) //nolint:gosec // the host's private copy of a plugin, checked against its SHA-256
	// Its own name as argv[0], not the copy's (NAME-RANDOM): what it calls itself in its
	// logs and traces.
	cmd.Args[0] = p.name
	cmd.Env = slices.Concat(p.host.opts.Env, p.host.opts.EnvFor[p.name], p.host.traceEnv(), memoryEnv(p.host.opts.MemoryLimit))
	return cmd
}

// clientOptions are the options of the client of a process whose stderr oom watches for a
// death out of memory.
func (p *process) clientOptions(oom *oomWatch) client.Options {
	return client.Options{
		Name:         p.name,
		StartTimeout: p.host.opts.StartTimeout,
		Logger:       newLogger(p.logger),
		// go-plugin's server sends what a plugin writes to os.Stdout and os.Stderr after it
		// started serving (a hook's fmt.Fprintln) over its stdio stream, not its stderr:
		// logged, not dropped.
		Stdout: newLineLogger(p.logger, "stdout"),
		Stderr: newLineLogger(p.logger, "stderr"),
		// The runtime's dying words go to the process's own stderr, which go-plugin reads.
		ProcessStderr:  oom,
		DeathCause:     func() string { return deathCause(oom, p.host.opts.MemoryLimit) },
		Restarts:       true,
		TracerProvider: p.host.opts.TracerProvider,
	}
}

// limitMemory sets the hard memory limit of process pid.
func limitMemory(pid int, limit int64) error {
	if limit <= 0 {
		return nil
	}
	if pid == 0 {
		return errors.New("set the memory limit: no process ID")
	}
	return limitProcessMemory(pid, limit)
}

func (p *process) describe(ctx context.Context) ([]client.Executor, error) {
	c, err := p.conn()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.host.opts.DescribeTimeout)
	defer cancel()
	executors, err := c.Describe(ctx)
	if err != nil {
		return nil, err
	}
	p.ok()
	return executors, nil
}

// settle does what a call's outcome tells of the process: one that answered serves, so
// its restart backoff starts over; one gone or unreachable is dropped, so that the next
// call starts a new one. The plugin serves every tenant: any other failure (an answer it
// could not encode, a message over the size limit) fails that call alone.
func (p *process) settle(c *client.Client, executor string, err error) {
	switch {
	case client.StageOf(err).Reached():
		p.ok()
	case contract.OwnReason(err) == client.ReasonPluginUnavailable:
		died := c.Exited()
		p.mu.Lock()
		if p.client == c { // not yet replaced by another call
			p.drop()
		}
		p.mu.Unlock()
		if died {
			p.logger.Error(err, "Plugin died during a hook; it is restarted on the next call", "executor", executor)
		} else {
			p.logger.Error(err, "Plugin connection lost; the plugin is restarted on the next call", "executor", executor)
		}
	}
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
	return p.client.PID()
}

func (p *process) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client != nil {
		p.client.Kill()
		p.client, p.oom = nil, nil
	}
}
