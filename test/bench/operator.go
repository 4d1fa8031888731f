package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

// operator is the e2e framework's operator process plus what the benchmark watches: the
// plugin processes it was seen running, stopped by PID if they outlive it.
type operator struct {
	*framework.Operator
	pid     int
	plugins map[int]string // plugin processes seen as children, by PID
	http    *http.Client
}

// startOperator starts bin/stepwise-operator as the e2e tests do, logging as little as in
// production so the log costs the measurement nothing, and waits until its caches synced;
// started, when not nil, is called as soon as the process serves its endpoints.
func startOperator(ctx context.Context, cluster *framework.Cluster, started func(*operator), extraArgs ...string) (*operator, error) {
	op, err := cluster.StartOperator(append([]string{"-v=0", "--profiling"}, extraArgs...)...)
	if err != nil {
		return nil, err
	}
	scraper, err := cluster.AdminMetricsClient()
	if err != nil {
		return nil, errors.Join(err, op.Stop())
	}
	scraper.Timeout = 10 * time.Second
	o := &operator{Operator: op, pid: op.PID(), plugins: map[int]string{}, http: scraper}
	if started != nil {
		if err := op.WaitServing(ctx); err != nil {
			return nil, errors.Join(err, o.stop())
		}
		started(o)
	}
	if err := op.WaitReady(ctx); err != nil {
		return nil, errors.Join(err, o.stop())
	}
	o.recordPlugins()
	return o, nil
}

// scrape reads the operator's /metrics.
func (o *operator) scrape(ctx context.Context) (samples, error) {
	var out samples
	err := o.get(ctx, o.MetricsURL, func(body io.Reader) (err error) {
		out, err = parseMetrics(body)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("scrape operator metrics: %w", err)
	}
	return out, nil
}

// get reads url from the operator's metrics endpoint and hands the body to read.
func (o *operator) get(ctx context.Context, url string, read func(io.Reader) error) error {
	return fetch(ctx, o.http, url, read)
}

// fetch GETs url with client and hands the body of an OK answer to read.
func fetch(ctx context.Context, client *http.Client, url string, read func(io.Reader) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return read(resp.Body)
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

// stop stops the operator (SIGTERM, bounded), then kills by PID any plugin process it was
// seen running that is still there. Stopping a stopped operator does nothing more.
func (o *operator) stop() error {
	select {
	case <-o.Exited():
		return nil
	default:
	}
	var errs []error
	if err := o.Stop(); err != nil {
		errs = append(errs, err)
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

// cpuProfile records the operator's CPU profile for d (--profiling), saves it to path and
// returns the top of it by cumulative time, as `go tool pprof -top -cum` prints it.
func (o *operator) cpuProfile(ctx context.Context, path string, d time.Duration, lines int) ([]string, error) {
	data, err := o.readCPUProfile(ctx, d)
	if err != nil {
		return nil, err
	}
	return savePprofTop(ctx, path, data, lines, "-cum")
}

// lastCPUProfile records CPU profiles of d one after the other until ctx ends, then saves
// the last complete one as cpuProfile does; none when ctx ended within the first.
func (o *operator) lastCPUProfile(ctx context.Context, path string, d time.Duration, lines int) ([]string, error) {
	var last []byte
	for {
		data, err := o.readCPUProfile(ctx, d)
		if ctx.Err() != nil {
			break // the phase ended during this profile
		}
		if err != nil {
			return nil, err
		}
		last = data
	}
	if last == nil {
		return nil, nil
	}
	return savePprofTop(context.WithoutCancel(ctx), path, last, lines, "-cum")
}

func (o *operator) readCPUProfile(ctx context.Context, d time.Duration) ([]byte, error) {
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(o.MetricsURL, "/metrics"), int(d.Seconds()))
	var data []byte
	long := *o.http // a profile answers after d
	long.Timeout = d + 30*time.Second
	err := fetch(ctx, &long, url, func(body io.Reader) (err error) {
		data, err = io.ReadAll(body)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read CPU profile: %w", err)
	}
	return data, nil
}

// heapProfile saves the operator's heap profile (--profiling) to path, after a GC so that
// it shows what is live, and returns the top of its in-use space as `go tool pprof -top`
// prints it.
func (o *operator) heapProfile(ctx context.Context, path string, lines int) ([]string, error) {
	url := strings.TrimSuffix(o.MetricsURL, "/metrics") + "/debug/pprof/heap?gc=1"
	var data []byte
	err := o.get(ctx, url, func(body io.Reader) (err error) {
		data, err = io.ReadAll(body)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read heap profile: %w", err)
	}
	return savePprofTop(ctx, path, data, lines, "-sample_index=inuse_space")
}

// savePprofTop saves a profile to path and returns the first lines of `go tool pprof -top`.
func savePprofTop(ctx context.Context, path string, data []byte, lines int, flags ...string) ([]string, error) {
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return nil, fmt.Errorf("save profile: %w", err)
	}
	out, err := exec.CommandContext(ctx, "go", append(append([]string{"tool", "pprof", "-top"}, flags...), path)...).Output()
	if err != nil {
		return nil, fmt.Errorf("go tool pprof -top %s: %w", path, err)
	}
	top := strings.Split(strings.TrimSpace(string(out)), "\n")
	return top[:min(len(top), lines)], nil
}
