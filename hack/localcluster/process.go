package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// layout names the files of one cluster's state directory. Every component
// gets at least one argument that contains dir (a data dir or the
// kubeconfig), which is what lets `down` recognise its own processes.
type layout struct {
	dir string
}

func (l layout) logs() string               { return filepath.Join(l.dir, "logs") }
func (l layout) pids() string               { return filepath.Join(l.dir, "pids") }
func (l layout) pki() string                { return filepath.Join(l.dir, "pki") }
func (l layout) etcdData() string           { return filepath.Join(l.dir, "etcd") }
func (l layout) kubeconfig() string         { return filepath.Join(l.dir, "kubeconfig") }
func (l layout) logFile(name string) string { return filepath.Join(l.logs(), name+".log") }
func (l layout) pidFile(name string) string { return filepath.Join(l.pids(), name+".pid") }

// child is a component process started by `up`.
type child struct {
	name   string
	log    string
	exited chan struct{} // closed when the process exits while `up` still runs
	err    error         // exit status, valid once exited is closed
}

// start launches bin with args as a detached process (own session, so it
// neither gets the terminal's SIGINT nor dies with `up`), logging to
// logs/<name>.log, and records its PID in pids/<name>.pid. bin must be an
// absolute path: it becomes argv[0], which `down` checks before signalling.
func (l layout) start(name, bin string, args ...string) (*child, error) {
	logPath := l.logFile(name)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log for %s: %w", name, err)
	}
	defer logf.Close() // the child keeps its own descriptor

	cmd := exec.Command(bin, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := os.WriteFile(l.pidFile(name), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("write pid file for %s: %w", name, err)
	}
	c := &child{name: name, log: logPath, exited: make(chan struct{})}
	// Reap the child if it dies while we are still waiting for the cluster,
	// so an early crash is reported at once instead of at the deadline.
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// ownedPID returns the PID recorded for name if that process is still alive
// and is one of ours: argv[0] is the localcluster, kwok or containerd binary and some
// argument lies inside this state dir. A recycled PID, or the same component
// of another cluster, never matches. It returns 0 when there is nothing to
// stop, and an error only for unreadable state.
func (l layout) ownedPID(name string) (int, error) {
	data, err := os.ReadFile(l.pidFile(name))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read pid file: %w", err)
	}
	// A PID file we cannot parse cannot name one of our processes; treat it
	// like any other stale file.
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 || !l.owns(pid) {
		return 0, nil
	}
	return pid, nil
}

// owns reports whether pid is a live process started for this state dir.
// Zombies have an empty cmdline, so they count as dead.
func (l layout) owns(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(raw) == 0 {
		return false
	}
	argv := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
	switch filepath.Base(argv[0]) {
	case "localcluster", "kwok", "containerd":
	default:
		return false
	}
	for _, a := range argv[1:] {
		if strings.Contains(a, l.dir+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// stop sends SIGTERM to the recorded process of name, waits up to grace for
// it to exit, then SIGKILLs it. The PID file is removed afterwards.
func (l layout) stop(name string, grace time.Duration) error {
	pid, err := l.ownedPID(name)
	if err != nil {
		return err
	}
	if pid != 0 {
		if err := signalAndWait(pid, l, syscall.SIGTERM, grace); err != nil {
			fmt.Fprintf(os.Stderr, "%s (pid %d) ignored SIGTERM for %s, sending SIGKILL\n", name, pid, grace)
			if err := signalAndWait(pid, l, syscall.SIGKILL, 10*time.Second); err != nil {
				return fmt.Errorf("kill %s (pid %d): %w", name, pid, err)
			}
		}
		fmt.Printf("stopped %s (pid %d)\n", name, pid)
	}
	if err := os.Remove(l.pidFile(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove pid file of %s: %w", name, err)
	}
	return nil
}

func signalAndWait(pid int, l layout, sig syscall.Signal, timeout time.Duration) error {
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("send %s: %w", sig, err)
	}
	deadline := time.Now().Add(timeout)
	for l.owns(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("still running %s after %s", timeout, sig)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// tail returns the last n bytes of a log, for error messages.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(-n, io.SeekEnd)
	}
	buf := make([]byte, n)
	k, _ := f.Read(buf)
	return string(buf[:k])
}
