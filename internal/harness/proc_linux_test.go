package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A process the harness started dies with the harness: the kernel kills it
// when the harness is SIGKILLed (nothing of the harness's own runs then).
func TestProcDiesWithHarness(t *testing.T) {
	if os.Getenv("HARNESS_PARENT") == "1" { // the harness: start a child, tell its pid, wait to be killed
		p, err := StartProc("sleeper", "/bin/sleep", nil, "600")
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("child", p.Pid())
		select {}
	}
	harness := exec.Command(os.Args[0], "-test.run=^TestProcDiesWithHarness$")
	harness.Env = append(os.Environ(), "HARNESS_PARENT=1")
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
	require.True(t, Alive(child), "the child runs while the harness does")

	require.NoError(t, harness.Process.Signal(syscall.SIGKILL))
	_ = harness.Wait()
	require.Eventually(t, func() bool { return !Alive(child) }, 10*time.Second, 10*time.Millisecond,
		"pid %d outlived the harness", child)
}

// startChild runs a shell that starts a grandchild, in its group or (own)
// in a session of its own, prints its pid and then runs rest; it returns
// both.
func startChild(t *testing.T, own bool, rest string) (*Proc, int) {
	t.Helper()
	start := "sleep 600 & echo $!; "
	if own {
		// The pid is written once the grandchild has left the group, so
		// the shell's exit, which ends the group, cannot catch it first.
		pid := t.TempDir() + "/pid"
		start = `setsid sh -c 'echo $$ >` + pid + `.new; mv ` + pid + `.new ` + pid + `; exec sleep 600' & ` +
			`while [ ! -e ` + pid + ` ]; do sleep 0.01; done; cat ` + pid + `; `
	}
	p, err := StartProc("sh", "/bin/sh", nil, "-c", start+rest)
	require.NoError(t, err)
	line, err := p.Await(context.Background(), "")
	require.NoError(t, err)
	grandchild, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err, "sh said %q", line)
	return p, grandchild
}

// A process is done when it exits and everything it wrote has been read,
// even while a grandchild that left its group (setsid, a daemon) holds the
// output pipe open: the harness would otherwise wait for the grandchild,
// and a drill would record a service that exited at once as killed after
// its grace. The exit is timed when the kernel reports it.
func TestProcDoneAtItsExitWhileADetachedChildHoldsItsOutput(t *testing.T) {
	// About as much as the pipe holds, so that some of it may be unread
	// when the process exits (TestOutputAfterTheExitEndsWhereThePipeDoes
	// makes sure of that case).
	p, grandchild := startChild(t, true, `i=0; while [ $i -lt 40000 ]; do echo "line $i of the last words"; i=$((i+1)); done; echo last; exit 0`)
	t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })

	wait, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, err := p.Wait(wait)
	require.NoError(t, err, "the process exited, but Wait waits for the grandchild holding its output")
	require.Equal(t, 0, code)
	require.True(t, Alive(grandchild), "the grandchild must still hold the pipe for this test to mean anything")
	lines := p.Lines()
	require.Equal(t, "last", lines[len(lines)-1], "the process's last line is read before Done")
	require.Len(t, lines, 1+40000+1) // the grandchild's pid, the lines, "last"
	_, ok := p.Exited()
	require.True(t, ok, "the exit is timed")
}

// What a process started in its own group ends when it exits, as a
// container's processes end with its main one, and when it is killed.
func TestProcGroupEndsWithTheProcess(t *testing.T) {
	tests := []struct {
		name string
		give string // what sh does once the grandchild runs
		kill bool
	}{
		{name: "exit", give: "exit 0"},
		{name: "kill", give: "while :; do sleep 0.05; done", kill: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, grandchild := startChild(t, false, tt.give)
			if tt.kill {
				p.Kill()
			}
			<-p.Done() // the grandchild held the pipe: it is exiting
			// A process closes its files before it becomes a zombie.
			if !assert.Eventually(t, func() bool { return !Alive(grandchild) }, 10*time.Second, time.Millisecond) {
				_ = syscall.Kill(grandchild, syscall.SIGKILL)
				t.Fatalf("grandchild %d outlived its process", grandchild)
			}
		})
	}
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
	line, ok := reported.ReportLine()
	require.True(t, ok)
	require.Contains(t, line, `"msg":"drain report"`)

	unreported := run(`echo "{\"time\":\"` + now + `\",\"msg\":\"drain phase\"}"; sleep 1`)
	require.Equal(t, unreported.ExitSeenAfter(), unreported.DrainTime(), "no report: timed at the exit the harness saw")
	_, ok = unreported.ReportLine()
	require.False(t, ok)
}

// Once the process has exited, its output is read to what the pipe holds,
// however much that is, and no further: here the test holds the write end
// open, as a detached grandchild would.
func TestOutputAfterTheExitEndsWhereThePipeDoes(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	growPipe(w)
	want := strings.Repeat("x", 200_000)
	_, err = w.WriteString(want)
	require.NoError(t, err)
	require.NoError(t, r.SetReadDeadline(time.Unix(1, 0))) // as at the exit

	got, err := io.ReadAll(output{r})
	require.NoError(t, err)
	require.Equal(t, len(want), len(got))
}
