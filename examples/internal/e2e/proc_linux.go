package e2e

import (
	"os"
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the process when the harness dies, so
// that a demo or test killed by Ctrl-\ or a CI timeout leaves no
// room-service, gateway or HAProxy behind holding its ports.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// pipeSize is the capacity asked for a child's output pipe: far more than a
// burst of log lines (the kernel's default is 64 KiB).
const pipeSize = 1 << 20

// growPipe enlarges the pipe whose write end is w, so that a child never
// blocks writing its logs while the harness is slow to read them. It is
// best effort: on failure the pipe keeps its size.
func growPipe(w *os.File) {
	const fSetPipeSz = 1031 // F_SETPIPE_SZ, absent from package syscall
	rc, err := w.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSz, pipeSize)
	})
}
