package drain_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/drain"
)

// throttledChild marks the copy of this test binary that drains while its
// parent throttles it.
const throttledChild = "DRAINKIT_STREAMS_THROTTLED_CHILD"

// A process short of CPU (a container at its CPU limit, a node shared with
// busier work) is stopped for tens of milliseconds at a time, so the
// pacing wakes that late. It must close what fell due meanwhile, or it
// closes one stream per wake-up, falls further behind the longer it runs,
// and leaves most of the streams to be closed at once when the window
// ends: the burst it exists to prevent.
//
// The drain runs in a copy of this test binary that the test throttles as
// the kernel's CPU limit does: stopped (SIGSTOP) for 90 ms of every 100.
func TestStreamsPaceKeepsUpWhenThrottled(t *testing.T) {
	const n = 200 // 100/s over the 2 s window: a close every 10 ms, capped at 200/s
	if os.Getenv(throttledChild) != "" {
		s := newStreams(t, drain.StreamsConfig{Name: "sse", MaxCloseRate: 200, Margin: 500 * time.Millisecond})
		h := openHandlers(t, s, n, false)
		r, got := drainStreams(s, 2500*time.Millisecond)
		h.wg.Wait()
		require.NoError(t, r.Err())
		require.NoError(t, json.NewEncoder(os.Stdout).Encode(got))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStreamsPaceKeepsUpWhenThrottled$", "-test.count=1")
	cmd.Env = append(os.Environ(), throttledChild+"=1")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { // throttle until the child has answered
		defer close(done)
		for {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond): // the child runs
			}
			_ = cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(90 * time.Millisecond) // the throttling being simulated, not a wait for a condition
			_ = cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	var got drain.StreamReport
	sc := bufio.NewScanner(out)
	for sc.Scan() { // the report, then the test's own lines ("PASS")
		if line := sc.Bytes(); bytes.HasPrefix(line, []byte("{")) {
			require.NoError(t, json.Unmarshal(line, &got))
		}
	}
	done <- struct{}{}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	require.NoError(t, cmd.Wait())
	t.Logf("throttled drain of %d streams: %+v", n, got)
	// A catch-up shorter than one stop (maxCatchUp) would leave most of
	// them to the window's end.
	assert.Equal(t, n, got.Paced+got.Hard, "streams closed by the drain")
	assert.Less(t, got.Hard, n/10, "closed at once at the window's end")
}
