//go:build !linux

package host

import "os/exec"

// orphanGuard does nothing where there is no parent-death signal.
func orphanGuard(*exec.Cmd) {}
