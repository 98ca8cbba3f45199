package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A process the harness started dies with the harness: the kernel kills it
// when the harness is SIGKILLed (nothing of the harness's own runs then).
func TestProcDiesWithHarness(t *testing.T) {
	if os.Getenv("E2E_HARNESS") == "1" { // the harness: start a child, tell its pid, wait to be killed
		p, err := StartProc("sleeper", "/bin/sleep", nil, "600")
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("child", p.cmd.Process.Pid)
		select {}
	}
	harness := exec.Command(os.Args[0], "-test.run=^TestProcDiesWithHarness$")
	harness.Env = append(os.Environ(), "E2E_HARNESS=1")
	out, err := harness.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, harness.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	f := strings.Fields(line)
	require.Len(t, f, 2, "harness said %q", line)
	require.Equal(t, "child", f[0], "harness said %q", line)
	child, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	require.True(t, alive(child), "the child runs while the harness does")

	require.NoError(t, harness.Process.Signal(syscall.SIGKILL))
	_ = harness.Wait()
	require.Eventually(t, func() bool { return !alive(child) }, 10*time.Second, 10*time.Millisecond,
		"pid %d outlived the harness", child)
}

// alive reports whether pid runs (a zombie waiting for its reaper does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}
