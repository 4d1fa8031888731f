package cli

import (
	"os/exec"
	"syscall"
)

// orphanGuard makes the kernel kill the plugin when kubectl-stepwise dies without killing
// it (SIGKILL), as the operator does for its plugins.
func orphanGuard(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
