package client

import (
	"os/exec"
	"syscall"
)

// orphanGuard makes the kernel kill the plugin when the process that started it dies
// without killing it (a crash, an OOM kill, SIGKILL, an operator exiting on lost
// leadership).
func orphanGuard(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
