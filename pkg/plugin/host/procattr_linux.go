package host

import (
	"os/exec"
	"syscall"
)

// orphanGuard makes the kernel kill the plugin when the operator dies without Close (a
// crash, an OOM kill, exiting on lost leadership).
func orphanGuard(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
