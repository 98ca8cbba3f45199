//go:build unix && !linux

package harness

import (
	"os"
	"os/exec"
	"syscall"
)

// OwnGroup puts the process in a group of its own; there is no
// parent-death signal outside Linux.
func OwnGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// awaitExit does not wait: an exit is seen only when the process is
// reaped, after which its group's id may be reused, so the group is
// killed only by [Proc.Kill] while the process runs.
func awaitExit(*os.Process) bool { return false }

// killGroup sends SIGKILL to p's process group.
func killGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGKILL) }

// growPipe leaves the pipe as it is.
func growPipe(*os.File) {}

// pipeBuffered cannot tell here: a process is done when its output pipe
// closes.
func pipeBuffered(*os.File) (int, bool) { return 0, false }
