package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/internal/e2e"
)

// subscribers is the subscribers program (examples/internal/e2e/subscribers)
// running. It holds the streams in a process of its own, built without the
// race detector: in this process, two thousand of them spent more CPU than
// any service and held the load clients off a CPU for seconds, so that the
// latencies and timeouts measured were the harness's.
type subscribers struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // its stdout, a line each; closed at its end
	stderr strings.Builder
}

// startSubscribers builds and starts the program on the cluster's balancer,
// per subscribers for each of the load's rooms, and waits until every one
// is connected. It is stopped at cleanup.
func startSubscribers(t *testing.T, c *e2e.Cluster, prefix string, per int) *subscribers {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	bin, err := e2e.BuildSubscribers(ctx, t.TempDir())
	require.NoError(t, err, "build the subscribers program")
	s := &subscribers{lines: make(chan string)}
	s.cmd = exec.Command(bin, "-url", c.URL(), "-prefix", prefix+"room-",
		"-rooms", strconv.Itoa(e2e.DefaultLoadRooms), "-per", strconv.Itoa(per), "-bound", bound.String())
	s.cmd.Stderr = &s.stderr
	stdout, err := s.cmd.StdoutPipe()
	require.NoError(t, err, "subscribers' stdout")
	s.stdin, err = s.cmd.StdinPipe()
	require.NoError(t, err, "subscribers' stdin")
	require.NoError(t, s.cmd.Start(), "start the subscribers")
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<26) // a report has an arrival per event
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = s.stdin.Close()
		_ = s.cmd.Process.Kill()
		for range s.lines {
		}
		_ = s.cmd.Wait()
	})
	require.Equal(t, "connected", s.next(t, "connected"), "subscribers' first line")
	return s
}

// next returns the program's next line, failing the test if it ends or
// says nothing within bound.
func (s *subscribers) next(t *testing.T, what string) string {
	t.Helper()
	select {
	case line, ok := <-s.lines:
		if !ok {
			_ = s.cmd.Wait()
			require.FailNowf(t, "subscribers ended", "subscribers ended before %s: %v\n%s", what, s.cmd.ProcessState, s.stderr.String())
		}
		return line
	case <-time.After(bound):
		require.FailNowf(t, "subscribers silent", "subscribers: no %s within %s", what, bound)
	}
	return ""
}

// check has the program compare every subscriber's events with its room's
// log, read through the balancer once every subscriber has caught up.
func (s *subscribers) check(t *testing.T) subscribersReport {
	t.Helper()
	_, err := io.WriteString(s.stdin, "check\n")
	require.NoError(t, err, "ask the subscribers for their check")
	var r subscribersReport
	require.NoError(t, json.Unmarshal([]byte(s.next(t, "report")), &r), "subscribers' report")
	return r
}

// subscribersReport is the program's report, as its JSON line has it
// (report in subscribers/main.go: a main package cannot be imported).
type subscribersReport struct {
	Subscribers int              `json:"subscribers"`
	Reconnects  int              `json:"reconnects"`
	Problems    []string         `json:"problems"`
	More        int              `json:"more"`
	Arrivals    map[string]int64 `json:"arrivals"` // command id → when the last of its room's subscribers had its event, Unix ns
}

// Subscribers, per room of the load, in the rolling-update scenario: 2,000
// in all, so each gateway holds about 1,000 when it drains.
const subscribersPerRoom = 100

// sseCloseCap is the paced gateway's SSE_MAX_CLOSE_RATE: well above its
// subscribers ÷ pacing window (about 1,000 ÷ 18 s), so the cap is not
// what forces a burst.
const sseCloseCap = 200

// naiveGateway is the gateway that closes its subscribers all at once near
// its deadline (SSE_MAX_CLOSE_RATE=off): the second of the two replaced.
const naiveGateway = "gateway-2"

// streamsDrainTimeout is the room-services' DRAIN_TIMEOUT here (the
// gateways' is it plus DefaultRequestTimeout): a room-service closes its
// gateways' watches paced over its budget, so a shorter one keeps the
// scenario shorter; the Redis-during-drain scenario drains in 4 s.
const streamsDrainTimeout = 6 * time.Second

// Subscribers follow every room through HAProxy while room-service and
// then the gateway are replaced under the command load: each receives
// every event of its room once and in order, as the room's log has them.
// Of the two gateways replaced, the first closes its subscribers paced
// (SSE_MAX_CLOSE_RATE=sseCloseCap), the second all at once near its
// deadline (off): the naive close, measured in the same run. HAProxy
// balances by least connections, so the second holds about as many
// subscribers when it drains as the first did, most of the first's having
// gone to the gateway that replaced it.
//
// The services here are built as users deploy them, whatever
// E2E_SERVICES_RACE says. Two thousand streams fed a hundred events a
// second keep race-built services on two cores at their limit, so a burst
// of reconnects stalled every room-service for seconds and requests
// timed out: the race detector's CPU, not the drain, decided the result
// (docs/reliability.md has the runs side by side). The stream code keeps
// the race detector in its packages' tests (gateway/app, room-service).
func TestSubscribersFollowRollingUpdates(t *testing.T) {
	raiseFileLimit(t, 4*subscribersPerRoom*e2e.DefaultLoadRooms)
	gwEnv := func(name string) []string {
		if name == naiveGateway {
			return []string{"SSE_MAX_CLOSE_RATE=off"}
		}
		return []string{fmt.Sprintf("SSE_MAX_CLOSE_RATE=%d", sseCloseCap)}
	}
	c, _ := startCluster(t, e2e.Config{Bin: plainBinaries(t), Balance: "leastconn", GatewayEnv: gwEnv, DrainTimeout: streamsDrainTimeout})
	prefix := strings.ReplaceAll(t.Name(), "/", "_") + "-"
	subs := startSubscribers(t, c, prefix, subscribersPerRoom)
	t.Logf("%d subscribers connected; %s", subscribersPerRoom*e2e.DefaultLoadRooms, usage(c, subs))

	gwTimeout := streamsDrainTimeout + e2e.DefaultRequestTimeout
	res, drained, w := rollUnderLoad(t, c, rollBound(e2e.DefaultRooms, e2e.DefaultGateways), func(ctx context.Context) ([]e2e.Drained, error) {
		rooms, err := c.RollRooms(ctx)
		if err != nil {
			return rooms, err
		}
		t.Logf("room-services replaced; %s", usage(c, subs))
		gws, err := c.RollGateways(ctx)
		return append(rooms, gws...), err
	})
	t.Logf("gateways replaced; %s", usage(c, subs))
	check(t, c, res, drained, w)
	require.Len(t, drained, e2e.DefaultRooms+e2e.DefaultGateways, "instances replaced")
	requireCleanRoll(t, drained[:e2e.DefaultRooms], e2e.DefaultRooms, streamsDrainTimeout)
	// The paced gateway is held to its DRAIN_TIMEOUT like every service.
	// The naive one is the baseline being measured: closing a thousand
	// streams at once, its margin before the deadline, is what it does
	// wrong, so only its drain (exit code 0: every hook in time) is
	// required; how late it exited is reported below.
	for _, d := range drained[e2e.DefaultRooms:] {
		if d.Name != naiveGateway {
			requireCleanRoll(t, []e2e.Drained{d}, 1, gwTimeout)
		} else {
			assert.Zero(t, d.ExitCode, "%s: exit code after %s; want 0 (its drain in time)", d.Name, d.DrainTime)
		}
	}

	r := subs.check(t)
	for _, p := range r.Problems {
		assert.Fail(t, p)
	}
	assert.Zero(t, r.More, "problems more than those listed")
	assert.Equal(t, subscribersPerRoom*e2e.DefaultLoadRooms, r.Subscribers, "subscribers checked")
	t.Logf("%d subscribers over %d rooms; %d reconnects in all; every event once and in order", r.Subscribers, e2e.DefaultLoadRooms, r.Reconnects)

	// The closes each gateway's drain sent to the others, as the balancer
	// relayed them.
	ends := c.StreamEnds()
	for _, d := range drained[e2e.DefaultRooms:] {
		cl := closesBy(ends, d)
		paced := d.Name != naiveGateway
		how := fmt.Sprintf("paced, cap %d/s", sseCloseCap)
		if !paced {
			how = "all at the deadline"
		}
		t.Logf("%s (%s): %s; exit %d after %s by its drain report, seen by the harness after %s (DRAIN_TIMEOUT %s)",
			d.Name, how, cl, d.ExitCode, d.DrainTime.Round(time.Millisecond), d.Exited.Sub(d.Signalled).Round(time.Millisecond), gwTimeout)
		assert.GreaterOrEqual(t, cl.n, subscribersPerRoom*e2e.DefaultLoadRooms/4,
			"%s: subscribers closed; want about half of %d: the comparison needs both gateways loaded", d.Name, r.Subscribers)
		if paced {
			assert.LessOrEqual(t, cl.perSecond, sseCloseCap, "%s: peak closes in one second; want at most its cap", d.Name)
		}
	}
}
