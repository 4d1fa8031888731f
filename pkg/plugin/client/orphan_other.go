//go:build !linux

package client

import "os/exec"

// orphanGuard does nothing where there is no parent-death signal: a plugin outlives a
// process killed with SIGKILL.
func orphanGuard(*exec.Cmd) {}
