//go:build !linux

package cli

import "os/exec"

// orphanGuard does nothing where there is no parent-death signal: a plugin outlives a
// kubectl-stepwise killed with SIGKILL.
func orphanGuard(*exec.Cmd) {}
