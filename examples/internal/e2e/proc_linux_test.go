package e2e

import (
	"bufio"
	"context"
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

// A process's exit is timed when it exits, not when its output has been
// read to its end: here a grandchild holds the output pipe open after the
// process exited, as a backlog of unread output would.
func TestProcExitTimedBeforeOutputEnds(t *testing.T) {
	p, err := StartProc("sh", "/bin/sh", nil, "-c", "sleep 600 & echo $!; exit 0")
	require.NoError(t, err)
	line, err := p.Await(context.Background(), "")
	require.NoError(t, err)
	grandchild, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err, "sh said %q", line)
	t.Cleanup(func() {
		_ = syscall.Kill(grandchild, syscall.SIGKILL)
		<-p.Done()
	})

	var exitAt time.Time
	require.Eventually(t, func() bool {
		var ok bool
		exitAt, ok = p.Exited()
		return ok
	}, 10*time.Second, time.Millisecond, "sh exited, but its exit is not seen while its output is open")
	select {
	case <-p.Done():
		t.Fatal("Done closed while the output pipe is still open")
	default:
	}

	require.NoError(t, syscall.Kill(grandchild, syscall.SIGKILL))
	<-p.Done()
	after, ok := p.Exited()
	require.True(t, ok)
	require.Equal(t, exitAt, after, "the exit time stays when the output ends")
	code, err := p.Wait(context.Background())
	require.NoError(t, err)
	require.Equal(t, 0, code)
}

// A drain is timed by the process's own drain report line when it wrote
// one after the SIGTERM: what comes after it (here a second's sleep, on a
// loaded machine the harness's wait for a CPU) is not the drain's. Without
// a report (other log lines do not count: a process may log and then hang)
// the harness's view of the exit is all there is.
func TestDrainTimeEndsAtTheDrainReport(t *testing.T) {
	// The time as slog writes it, from the shell; Go parses both forms.
	const now = `$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)`
	run := func(onTerm string) *Proc {
		t.Helper()
		script := "trap '" + onTerm + "; exit 0' TERM\necho ready\nwhile :; do sleep 0.05; done"
		p, err := StartProc("sh", "/bin/sh", nil, "-c", script)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = p.Await(ctx, "ready")
		require.NoError(t, err)
		require.NoError(t, p.Signal(syscall.SIGTERM))
		code, err := p.Wait(ctx)
		require.NoError(t, err)
		require.Equal(t, 0, code)
		require.GreaterOrEqual(t, p.ExitSeenAfter(), time.Second, "the exit is seen after the trap's sleep")
		return p
	}
	reported := run(`echo "{\"time\":\"` + now + `\",\"msg\":\"drain report\"}"; sleep 1`)
	require.Less(t, reported.DrainTime(), time.Second, "timed at the report, before the sleep")
	require.Positive(t, reported.DrainTime())

	unreported := run(`echo "{\"time\":\"` + now + `\",\"msg\":\"drain phase\"}"; sleep 1`)
	require.Equal(t, unreported.ExitSeenAfter(), unreported.DrainTime(), "no report: timed at the exit the harness saw")
}
