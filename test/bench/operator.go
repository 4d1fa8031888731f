package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// operator is a stepwise-operator process started by the benchmark. It is stopped by the
// PID recorded at start, and so are the plugin processes it was seen running.
type operator struct {
	cmd        *exec.Cmd
	pid        int
	done       chan struct{} // closed once the process has exited
	waitErr    error         // why it exited; read after done is closed
	log        string
	metricsURL string
	healthURL  string
	plugins    map[int]string // plugin processes seen as children, by PID
	http       *http.Client
}

// servingRE finds the addresses the operator logs once its endpoints listen (they are
// started on port 0, so only the log tells them).
var servingRE = regexp.MustCompile(`"Serving" endpoint="(metrics|health)" address="([^"]+)"`)

// startOperator starts bin/stepwise-operator with the test executors and without leader
// election (as the e2e framework does), and waits until its caches have synced.
func startOperator(ctx context.Context, bin, kubeconfig, logDir string, extraArgs ...string) (*operator, error) {
	logPath := filepath.Join(logDir, fmt.Sprintf("bench-operator-%d.log", time.Now().UnixNano()))
	log, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create operator log: %w", err)
	}
	defer func() { _ = log.Close() }() // the child keeps its own descriptor
	args := append([]string{
		"--kubeconfig", kubeconfig,
		"--enable-test-executors",
		"--leader-elect=false",
		"--metrics-bind-address=127.0.0.1:0",
		"--health-probe-bind-address=127.0.0.1:0",
		"--shutdown-grace-period=5s",
	}, extraArgs...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	// The operator must not outlive a benchmark that dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start operator: %w", err)
	}
	o := &operator{
		cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{}), log: logPath,
		plugins: map[int]string{}, http: &http.Client{Timeout: 10 * time.Second},
	}
	go func() { o.waitErr = cmd.Wait(); close(o.done) }()

	if err := o.waitReady(ctx); err != nil {
		return nil, errors.Join(err, o.stop())
	}
	o.recordPlugins()
	return o, nil
}

// waitReady reads the endpoints' addresses from the log, then waits for /readyz.
func (o *operator) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		select {
		case <-o.done:
			return false, fmt.Errorf("operator exited (log: %s): %v", o.log, o.waitErr)
		default:
		}
		data, err := os.ReadFile(o.log)
		if err != nil {
			return false, fmt.Errorf("read operator log: %w", err)
		}
		for _, m := range servingRE.FindAllStringSubmatch(string(data), -1) {
			if m[1] == "metrics" {
				o.metricsURL = "http://" + m[2] + "/metrics"
			} else {
				o.healthURL = "http://" + m[2] + "/readyz"
			}
		}
		if o.metricsURL == "" || o.healthURL == "" {
			return false, nil
		}
		resp, err := o.http.Get(o.healthURL)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the operator to be ready (log: %s): %w", o.log, err)
	}
	return nil
}

// scrape reads the operator's /metrics.
func (o *operator) scrape(ctx context.Context) (samples, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.metricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := o.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape operator metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape operator metrics: %s", resp.Status)
	}
	return parseMetrics(resp.Body)
}

// procStatus is what /proc tells of a process' memory.
type procStatus struct {
	RSSBytes  float64 // VmRSS
	PeakBytes float64 // VmHWM: the peak RSS since start or since resetPeak
}

func readProcStatus(pid int) (procStatus, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procStatus{}, fmt.Errorf("read status of process %d: %w", pid, err)
	}
	var st procStatus
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseFloat(fields[1], 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "VmRSS:":
			st.RSSBytes = kb * 1024
		case "VmHWM:":
			st.PeakBytes = kb * 1024
		}
	}
	return st, nil
}

// resetPeak resets the process' VmHWM to its current RSS, so that the next reading is the
// peak of one phase. It reports whether the kernel allowed it.
func resetPeak(pid int) bool {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
}

// userHZ is the unit of /proc/<pid>/stat's CPU times; 100 on every Linux architecture Go
// supports (USER_HZ, not the kernel's HZ).
const userHZ = 100

// cpuSeconds is the user+system CPU time of a process, from /proc/<pid>/stat.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read stat of process %d: %w", pid, err)
	}
	// The command name, in parentheses, may hold spaces: count fields after it.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("short stat of process %d", pid)
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("parse stat of process %d: %w", pid, err)
	}
	return (utime + stime) / userHZ, nil
}

// children lists the processes whose parent is pid, with their command lines.
func children(pid int) map[int]string {
	out := map[int]string{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		child, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
		if err != nil {
			continue
		}
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child))
		out[child] = strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return out
}

// recordPlugins notes the plugin processes running under the operator now, so that stop
// can make sure they are gone, and returns them.
func (o *operator) recordPlugins() map[int]string {
	now := map[int]string{}
	for pid, cmd := range children(o.pid) {
		if strings.Contains(filepath.Base(strings.Fields(cmd + " x")[0]), "stepwise-plugin-") {
			now[pid] = cmd
			o.plugins[pid] = cmd
		}
	}
	return now
}

// stop sends SIGTERM to the operator's PID and waits, bounded, for it to exit; then kills
// by PID any plugin process it was seen running that is still there. Stopping a stopped
// operator does nothing (its PID may belong to another process by then).
func (o *operator) stop() error {
	select {
	case <-o.done:
		return nil
	default:
	}
	var errs []error
	// Signalling through cmd.Process, not the bare PID, is safe against PID reuse: it is a
	// no-op once the process has been waited for.
	if err := o.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		errs = append(errs, fmt.Errorf("stop operator %d: %w", o.pid, err))
	}
	select {
	case <-o.done:
	case <-time.After(30 * time.Second):
		errs = append(errs, fmt.Errorf("operator %d did not stop within 30s of SIGTERM, killed it", o.pid))
		_ = o.cmd.Process.Kill()
		<-o.done
	}
	for pid, cmd := range o.plugins {
		// The operator stops its plugins; a PID still running the same command is one it missed.
		if cur, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil &&
			strings.TrimSpace(strings.ReplaceAll(string(cur), "\x00", " ")) == cmd {
			errs = append(errs, fmt.Errorf("plugin process %d outlived the operator, killed it", pid))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return errors.Join(errs...)
}
