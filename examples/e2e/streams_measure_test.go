package e2e

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/internal/e2e"
)

// raiseFileLimit raises this process's open-file limit to at least want,
// within the hard limit; the processes it starts (HAProxy, the services)
// inherit it. Every subscriber holds a connection here, two in HAProxy and
// one in a gateway.
func raiseFileLimit(t *testing.T, want uint64) {
	t.Helper()
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim), "getrlimit RLIMIT_NOFILE")
	require.GreaterOrEqual(t, lim.Max, want, "open-file hard limit; want at least this for the subscribers' connections")
	if lim.Cur < want {
		lim.Cur = want
	}
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim), "setrlimit RLIMIT_NOFILE to %d", lim.Cur)
}

// closes summarises the stream closes one gateway's drain made, as the
// balancer relayed them.
type closes struct {
	n           int
	perSecond   int           // most closes in any one second
	per100ms    int           // most closes in any 100 ms
	first, last time.Duration // after the SIGTERM
	afterReport int           // ended after the gateway's drain report
}

func (c closes) String() string {
	return fmt.Sprintf("%d closes, peak %d in one second (%d in 100 ms: %d/s), first %s and last %s after SIGTERM (%d after its drain report)",
		c.n, c.perSecond, c.per100ms, 10*c.per100ms, c.first.Round(time.Millisecond), c.last.Round(time.Millisecond), c.afterReport)
}

// closesBy summarises the event streams gateway d served that ended after
// its SIGTERM: those of its slot begun before it exited (its successor on
// the slot starts after that). Each is attributed by the balancer's log
// and timed by the balancer, not by the subscribers, whose process shares
// the machine's cores with the cluster. Counting the closes the
// subscribers saw, when they ran in the test process and waited a second
// and more for a CPU, once counted 378 of a gateway's 1,000.
func closesBy(ends []e2e.StreamEnd, d e2e.Drained) closes {
	from, report := d.Signalled, d.Signalled.Add(d.DrainTime)
	slot := e2e.GatewaySlot(d.Slot)
	var in []time.Time
	c := closes{}
	for _, e := range ends {
		if e.Slot == slot && e.Start.Before(d.Exited) && !e.End.Before(from) {
			in = append(in, e.End)
			if e.End.After(report) {
				c.afterReport++
			}
		}
	}
	slices.SortFunc(in, func(a, b time.Time) int { return a.Compare(b) })
	c.n = len(in)
	if len(in) == 0 {
		return c
	}
	c.first, c.last = in[0].Sub(from), in[len(in)-1].Sub(from)
	densest := func(w time.Duration) int {
		most, j := 0, 0
		for i := range in { // in[j..i] lie within w of in[i]
			for in[i].Sub(in[j]) >= w {
				j++
			}
			most = max(most, i-j+1)
		}
		return most
	}
	c.perSecond, c.per100ms = densest(time.Second), densest(100*time.Millisecond)
	return c
}

// usage describes the machine's load and, for this process, the
// subscribers' and every service still running, resident memory, open
// files and CPU time.
func usage(c *e2e.Cluster, subs *subscribers) string {
	load, _ := os.ReadFile("/proc/loadavg")
	parts := []string{"load " + strings.Join(strings.Fields(string(load))[:3], " ")}
	describe := func(name string, pid int) {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		rss := "?"
		for line := range strings.SplitSeq(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				if kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB")); err == nil {
					rss = fmt.Sprintf("%d MiB", kb/1024)
				}
			}
		}
		cpu := "?"
		if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			// Fields after the command's closing parenthesis: utime and
			// stime are the 12th and 13th, in clock ticks (100 a second).
			if _, rest, ok := strings.Cut(string(stat), ") "); ok {
				if f := strings.Fields(rest); len(f) > 12 {
					u, _ := strconv.Atoi(f[11])
					s, _ := strconv.Atoi(f[12])
					cpu = fmt.Sprintf("%.0fs", float64(u+s)/100)
				}
			}
		}
		parts = append(parts, fmt.Sprintf("%s %s %d fds %s CPU", name, rss, len(fds), cpu))
	}
	describe("test", os.Getpid())
	describe("subscribers", subs.cmd.Process.Pid)
	for _, n := range c.All() {
		if _, exited := n.Exited(); !exited {
			describe(n.Name, n.Pid())
		}
	}
	return strings.Join(parts, "; ")
}
