package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"unsafe"
)

// OwnGroup puts the process of cmd, before it starts, in a group of its own
// and has the kernel kill it when the harness dies, so that a demo, test or
// drill killed by Ctrl-\, SIGKILL or a CI timeout leaves nothing behind
// holding its ports. Every server a harness starts gets it (mariadbtest's too).
//
// Pdeathsig fires when the thread that started the child exits, not the
// process; the Go runtime ends a thread only when a goroutine locked to it
// exits, and the harness locks none.
func OwnGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// awaitExit blocks until p has exited, leaving it unreaped (waitid with
// WNOWAIT, as package os does before it reaps), and reports whether it
// saw the exit.
func awaitExit(p *os.Process) bool {
	const pPID = 1 // P_PID
	var siginfo [16]uint64
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(p.Pid),
			uintptr(unsafe.Pointer(&siginfo[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if !errors.Is(errno, syscall.EINTR) {
			return errno == 0
		}
	}
}

// killGroup sends SIGKILL to p's process group. Call it only while p is
// not reaped: until then its pid, the group's id, cannot be reused.
func killGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGKILL) }

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

// pipeBuffered is how many bytes the pipe whose read end is r holds
// (FIONREAD); known is false if it cannot tell.
func pipeBuffered(r *os.File) (int, bool) {
	var n int32 // FIONREAD writes a C int
	rc, err := r.SyscallConn()
	if err != nil {
		return 0, false
	}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil || errno != 0 {
		return 0, false
	}
	return int(n), true
}

// Alive reports whether pid runs; a zombie waiting for its reaper does not.
// Tests use it to check that nothing a harness started outlives it.
func Alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}
