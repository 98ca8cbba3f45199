package e2e

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the process when the harness dies, so
// that a demo or test killed by Ctrl-\ or a CI timeout leaves no
// room-service, gateway or HAProxy behind holding its ports.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
