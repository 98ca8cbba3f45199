//go:build !unix

package harness

import (
	"os"
	"os/exec"
)

// OwnGroup does nothing where there are no process groups.
func OwnGroup(*exec.Cmd) {}

// awaitExit does not wait; the exit is seen when the process is reaped.
func awaitExit(*os.Process) bool { return false }

// killGroup kills p alone.
func killGroup(p *os.Process) { _ = p.Kill() }

// growPipe leaves the pipe as it is.
func growPipe(*os.File) {}

// pipeBuffered cannot tell here: a process is done when its output pipe
// closes.
func pipeBuffered(*os.File) (int, bool) { return 0, false }
