package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Process is a live process as /proc shows it.
type Process struct {
	PID  int
	PPID int
	// Exe is argv[0]: the path the process was started with.
	Exe string
}

// Processes lists the live processes (zombies excluded) for which match returns true.
func Processes(match func(Process) bool) ([]Process, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, ok := readProcess(pid)
		if ok && match(p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// readProcess reads a live process's argv[0] and parent; ok is false when it is gone or a
// zombie (a zombie's cmdline is empty).
func readProcess(pid int) (Process, bool) {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(cmdline) == 0 {
		return Process{}, false
	}
	arg0, _, _ := bytes.Cut(cmdline, []byte{0})
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Process{}, false
	}
	p := Process{PID: pid, Exe: string(arg0)}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "State:"); ok && strings.HasPrefix(strings.TrimSpace(v), "Z") {
			return Process{}, false
		}
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			p.PPID, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return p, true
}

// processArgs returns the whole command line of a live process.
func processArgs(pid int) ([]string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	if len(raw) == 0 {
		return nil, errors.New("a zombie")
	}
	return strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00"), nil
}

// APIServerRestart says how a restart of the API server went.
type APIServerRestart struct {
	// OldPID and NewPID are the API server's processes before and after.
	OldPID, NewPID int
	// Stopping is how long the old process took to exit after the first signal.
	Stopping time.Duration
	// Killed tells that it had to be SIGKILLed: it was still running after grace.
	Killed bool
	// Starting is from the new process's start until /readyz answered OK.
	Starting time.Duration
	// Outage is from the first signal until /readyz answered OK again.
	Outage time.Duration
}

// RestartAPIServer restarts the cluster's kube-apiserver alone: localcluster runs it as a
// process of its own (etcd, the controllers and kwok are others), recorded in
// pids/kube-apiserver.pid. It stops exactly that process as a kubelet stops a container:
// SIGTERM, then SIGKILL once grace has passed (0: SIGKILL at once, a crash). A graceful
// stop alone can take a minute: the API server waits for its open watches. It keeps it
// down for down more, then runs the same command line again (same port, certificates and
// etcd, so the data and every client's kubeconfig stay valid) as a detached process
// logging to the same log, records its PID where localcluster does (so Stop and the
// watchdog stop it), and waits until /readyz answers. ctx bounds the whole restart.
func (c *Cluster) RestartAPIServer(ctx context.Context, grace, down time.Duration) (APIServerRestart, error) {
	var r APIServerRestart
	pidFile := filepath.Join(c.Dir, "pids", "kube-apiserver.pid")
	data, err := os.ReadFile(pidFile)
	if err != nil {
		return r, fmt.Errorf("read the API server's PID: %w", err)
	}
	if r.OldPID, err = strconv.Atoi(strings.TrimSpace(string(data))); err != nil || r.OldPID <= 1 {
		return r, fmt.Errorf("bad PID file %s: %q", pidFile, data)
	}
	args, err := processArgs(r.OldPID)
	if err != nil {
		return r, fmt.Errorf("read the command line of the API server (pid %d): %w", r.OldPID, err)
	}
	// The PID must still name this cluster's API server, not a recycled PID.
	if filepath.Base(args[0]) != "localcluster" || len(args) < 2 || args[1] != "kube-apiserver" ||
		!strings.Contains(strings.Join(args, " "), c.Dir+string(filepath.Separator)) {
		return r, fmt.Errorf("pid %d is not the API server of %s: %q", r.OldPID, c.Dir, args)
	}

	start := time.Now()
	exited := func(context.Context) (bool, error) {
		_, alive := readProcess(r.OldPID)
		return !alive, nil
	}
	sig := syscall.SIGTERM
	if grace <= 0 {
		sig = syscall.SIGKILL
	}
	if err := syscall.Kill(r.OldPID, sig); err != nil {
		return r, fmt.Errorf("signal the API server (pid %d): %w", r.OldPID, err)
	}
	if sig == syscall.SIGTERM {
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, grace, true, exited); err != nil {
			if ctx.Err() != nil {
				return r, ctx.Err()
			}
			r.Killed = true
			sig = syscall.SIGKILL
			if err := syscall.Kill(r.OldPID, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
				return r, fmt.Errorf("kill the API server (pid %d): %w", r.OldPID, err)
			}
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, exited); err != nil {
		return r, fmt.Errorf("the API server (pid %d) did not exit after %s: %w", r.OldPID, sig, err)
	}
	r.Stopping = time.Since(start)
	select {
	case <-time.After(down):
	case <-ctx.Done():
		return r, ctx.Err()
	}

	log, err := os.OpenFile(filepath.Join(c.Dir, "logs", "kube-apiserver.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return r, fmt.Errorf("open the API server's log: %w", err)
	}
	defer func() { _ = log.Close() }() // the child keeps its own descriptor
	_, _ = fmt.Fprintf(log, "\n===== restarted by the e2e framework after %s (down %s) =====\n", sig, down)
	cmd := exec.Command(args[0], args[1:]...) //nolint:gosec // the command line localcluster gave it
	cmd.Stdout, cmd.Stderr = log, log
	// Detached, as localcluster starts it: the watchdog and Stop stop it by its PID file.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return r, fmt.Errorf("start the API server again: %w", err)
	}
	r.NewPID = cmd.Process.Pid
	go func() { _ = cmd.Wait() }() // reap it whenever it exits
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(r.NewPID)+"\n"), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return r, fmt.Errorf("record the API server's PID: %w", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, alive := readProcess(r.NewPID); !alive {
			return false, fmt.Errorf("the API server exited (log %s/logs/kube-apiserver.log)", c.Dir)
		}
		_, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, nil
	})
	if err != nil {
		return r, fmt.Errorf("wait for the restarted API server to be ready: %w", err)
	}
	r.Starting = time.Since(started)
	r.Outage = time.Since(start)
	return r, nil
}

// PeakRSS is the peak resident set size of a live process (VmHWM), in bytes.
func PeakRSS(pid int) (int64, error) { return processMemory(pid, "VmHWM") }

// RSS is the resident set size of a live process (VmRSS), in bytes.
func RSS(pid int) (int64, error) { return processMemory(pid, "VmRSS") }

// processMemory reads a figure of /proc/PID/status given in kB, in bytes.
func processMemory(pid int, field string) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read the status of process %d: %w", pid, err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("read %s of process %d: %w", field, pid, err)
			}
			return kib << 10, nil
		}
	}
	return 0, fmt.Errorf("process %d has no %s", pid, field)
}
