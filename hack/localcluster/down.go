package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// runDown stops exactly the processes `up` recorded in the state dir (see
// layout.owns for how a recycled PID is told apart) and removes their PID
// files. Everything else (logs, etcd data, certs, kubeconfig) stays for
// inspection; the next `up` wipes it and starts an empty cluster.
//
// With --wait-for-pid it first waits, without a deadline, for that process
// to exit: the e2e framework runs it as a watchdog so a test binary that
// dies without cleaning up (panic, -timeout) does not leave a cluster behind.
func runDown(args []string) error {
	fs := flag.NewFlagSet("down", flag.ContinueOnError)
	dir := fs.String("dir", ".local", "state directory given to up")
	waitFor := fs.Int("wait-for-pid", 0, "first wait until this process has exited")
	if err := fs.Parse(args); err != nil {
		return err
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", *dir, err)
	}
	if *waitFor > 0 {
		for processAlive(*waitFor) {
			time.Sleep(time.Second)
		}
		fmt.Printf("process %d exited, stopping the cluster\n", *waitFor)
	}
	if err := stopAll(layout{dir: abs}); err != nil {
		return err
	}
	fmt.Printf("cluster in %s is down\n", abs)
	return nil
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Format: "pid (comm) state ..."; comm may contain spaces and parens.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
}
