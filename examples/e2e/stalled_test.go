package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/internal/e2e"
)

// Targets for a node that stalls (stopped, or cut off from Redis): its
// rooms are served by another node within LEASE_TTL + takeOverSlack of the
// fault's start, and commands pending during the fault wait at most
// LEASE_TTL + p99Slack at the 99th percentile. The slack is what detecting
// the stall (the gateway's attempt budget, 1 s) and the retries' backoff
// add to the lease's expiry.
const (
	takeOverSlack = time.Second
	p99Slack      = 1500 * time.Millisecond
)

// probeAll watches the readiness and liveness of every room-service and
// gateway until the returned function is called, which returns what was
// seen.
func probeAll(c *e2e.Cluster) func() *probes {
	stop := make(chan struct{})
	p := watchProbes(c, append(c.Rooms(), c.Gateways()...), stop)
	return func() *probes {
		close(stop)
		p.wg.Wait()
		return p
	}
}

// liveThroughout fails the test on any liveness answer but 200, and if
// nothing was probed.
func liveThroughout(t *testing.T, p *probes) {
	t.Helper()
	assert.Empty(t, p.liveBad, "liveness not 200; want 200 on every replica throughout")
	assert.NotZero(t, p.live, "liveness answers checked: with none, the scenario tested nothing")
	t.Logf("liveness: %d answers 200, %d unanswered while their process was stopped", p.live, p.exempt)
}

// heldAt returns the rooms node held at the moment at.
func heldAt(r *e2e.Report, node string, at time.Time) []string {
	var rooms []string
	for room, hs := range r.Holds {
		for _, h := range hs {
			// A hold lost while its node was stopped ends at the stop (see
			// e2e.Cluster.Pause): held at at, too.
			if h.Node == node && h.From.Before(at) && (h.Open || !h.To.Before(at)) {
				rooms = append(rooms, room)
			}
		}
	}
	return rooms
}

// takenOver checks that each room node held when the fault began was
// acquired by another node no earlier than a valid lease can have expired
// (every key had more than TTL·2/3 to live while its owner renewed it) and
// within ttl + takeOverSlack.
func takenOver(t *testing.T, r *e2e.Report, node string, fault time.Time, ttl time.Duration) {
	t.Helper()
	rooms := heldAt(r, node, fault)
	require.NotEmpty(t, rooms, "rooms %s held when the fault began: with none, the scenario tested nothing", node)
	var slowest time.Duration
	for _, room := range rooms {
		var next *e2e.Hold
		for _, h := range r.Holds[room] {
			if h.Node != node && h.From.After(fault) {
				next = &h
				break
			}
		}
		if !assert.NotNil(t, next, "room %s: held by %s when the fault began, never acquired by another node", room, node) {
			continue
		}
		gap := next.From.Sub(fault)
		slowest = max(slowest, gap)
		assert.GreaterOrEqual(t, gap, ttl*2/3,
			"room %s: time from the fault's start to its take-over by %s; want no earlier than TTL·2/3: a valid lease was taken over", room, next.Node)
		assert.LessOrEqual(t, gap, ttl+takeOverSlack,
			"room %s: time from the fault's start until %s served it again; want within LEASE_TTL %s + %s", room, next.Node, ttl, takeOverSlack)
	}
	t.Logf("%d rooms of %s taken over, the last %s after the fault began", len(rooms), node, slowest.Round(time.Millisecond))
}

// feedMoveBound is the longest an event may take to reach every subscriber
// of its room while a room-service stalls. A gateway's watch on the
// stalled node ends after a second: a stopped node's once it has sent no
// heartbeat (one every 250 ms) for a second, a cut-off node's once its
// reads of the room have failed for a second (a read's budget, begun
// within the 100 ms poll after the cut). The feed waits up to 150 ms and
// watches on another node, which reads the room at once: about 1.3 s,
// and the rest is slack for a loaded machine's scheduling. A watch left on
// the stalled node would hold its events for the fault's whole 2×LEASE_TTL.
const feedMoveBound = 3 * time.Second

// Subscribers per room of the load in the stall scenarios.
const stalledSubscribersPerRoom = 5

// eventsFollowed checks that every subscriber received every event of its
// room once and in order, and that an event of a command acknowledged
// during the fault reached the last of its room's subscribers within
// feedMoveBound of the acknowledgement.
func eventsFollowed(t *testing.T, subs *subscribers, res *e2e.LoadResult, fault e2e.Window) {
	t.Helper()
	r := subs.check(t)
	for _, p := range r.Problems {
		assert.Fail(t, p)
	}
	assert.Zero(t, r.More, "problems more than those listed")
	var during, tooLate int
	var slowest time.Duration
	var slowestCmd string
	for _, o := range res.Outcomes {
		if !o.Acked || o.Answered.Before(fault.From) || o.Answered.After(fault.To) {
			continue
		}
		during++
		at, ok := r.Arrivals[o.CommandID]
		if !assert.True(t, ok, "command %s: acknowledged, its event never reached the subscribers", o.CommandID) {
			continue
		}
		late := time.Unix(0, at).Sub(o.Answered)
		if late > feedMoveBound {
			tooLate++
		}
		if late > slowest {
			slowest, slowestCmd = late, o.CommandID+" in "+o.Room
		}
	}
	require.NotZero(t, during, "commands acknowledged during the fault: with none, the events were not tested")
	assert.Zero(t, tooLate, "events of the fault's commands that reached their room's last subscriber more than %s after the acknowledgement (of %d; the slowest, %s, after %s)",
		feedMoveBound, during, slowestCmd, slowest.Round(time.Millisecond))
	t.Logf("%d subscribers, %d reconnects; %d events of the fault's commands, the slowest at every subscriber %s after its acknowledgement",
		r.Subscribers, r.Reconnects, during, slowest.Round(time.Millisecond))
}

// withinP99 checks the latency of the commands pending during the fault.
func withinP99(t *testing.T, r *e2e.Report, ttl time.Duration) {
	t.Helper()
	assert.LessOrEqual(t, r.Latency.P99, ttl+p99Slack, "p99 during the fault; want at most LEASE_TTL %s + %s", ttl, p99Slack)
}

// A room-service stopped (SIGSTOP) for twice its lease TTL, as a paused VM
// or a throttled container is: its leases expire, the gateways stop
// sending to it within an attempt, and its rooms are served by the next
// node; when it wakes its leases are gone and its first liveness answer is
// 200, since a pause of the whole process is not a stuck loop. The rooms'
// subscribers get every event, none held by a watch on the stopped node.
func TestPausedRoomServicesRoomsMove(t *testing.T) {
	const ttl = e2e.DefaultLeaseTTL
	c, _ := startCluster(t, e2e.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	subs := startSubscribers(t, c, strings.ReplaceAll(t.Name(), "/", "_")+"-", stalledSubscribersPerRoom)
	wait := loadPastSteady(t, ctx, c, 4*ttl+4*time.Second)
	victim := c.Busiest()
	probed := probeAll(c)
	resume, err := c.Pause(victim)
	require.NoError(t, err, "pause %s", victim.Name)
	t.Cleanup(func() { resume() })
	<-time.After(2 * ttl) // the fault's length is the scenario, not a wait for a condition
	fault := resume()
	require.NoError(t, c.AwaitReady(ctx, victim), "%s not ready again after waking", victim.Name)
	res := wait()
	p := probed()
	r := check(t, c, res, nil, fault)

	liveThroughout(t, p)
	takenOver(t, r, victim.Name, fault.From, ttl)
	withinP99(t, r, ttl)
	eventsFollowed(t, subs, res, fault)
}

// A room-service cut off from Redis for twice its lease TTL while its gRPC
// port still answers: a proxy between it and Redis holds every byte. It
// turns not ready within the TTL, its rooms move, and once the partition
// heals its late writes are refused (fenced); liveness stays 200. The
// rooms' subscribers get every event, none held by a watch on the node cut
// off.
func TestRoomServiceCutOffFromRedis(t *testing.T) {
	const ttl = e2e.DefaultLeaseTTL
	c, _ := startCluster(t, e2e.Config{Rooms: e2e.DefaultRooms - 1})
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	proxy, err := c.StartRedisProxy()
	require.NoError(t, err, "start the Redis proxy")
	t.Cleanup(proxy.Close)
	victim, err := c.StartRoomVia(ctx, -1, proxy)
	require.NoError(t, err, "start a room-service via the proxy")
	subs := startSubscribers(t, c, strings.ReplaceAll(t.Name(), "/", "_")+"-", stalledSubscribersPerRoom)
	wait := loadPastSteady(t, ctx, c, 4*ttl+4*time.Second)
	probed := probeAll(c)
	fault := e2e.Window{From: time.Now()}
	proxy.Hold()
	<-time.After(2 * ttl) // the fault's length is the scenario, not a wait for a condition
	proxy.Forward()
	fault.To = time.Now()
	require.NoError(t, c.AwaitReady(ctx, victim), "%s not ready again after the partition healed", victim.Name)
	res := wait()
	p := probed()
	r := check(t, c, res, nil, fault)

	liveThroughout(t, p)
	at, ok := p.notReady[victim.Name]
	assert.True(t, ok && at.Sub(fault.From) <= ttl, "%s: not ready %s after the cut (seen: %v); want within LEASE_TTL %s", victim.Name, at.Sub(fault.From), ok, ttl)
	takenOver(t, r, victim.Name, fault.From, ttl)
	withinP99(t, r, ttl)
	eventsFollowed(t, subs, res, fault)
	// Running but cut off, the victim must give its rooms up itself
	// before their keys expire: the ownership check above found no second
	// owner, and here each of its holds ended lost.
	for room, hs := range r.Holds {
		for _, h := range hs {
			if h.Node == victim.Name && h.From.Before(fault.From) && (h.Open || !h.To.Before(fault.From)) {
				assert.True(t, !h.Open && strings.Contains(h.EndedCause, "lost"),
					"room %s on %s: held when cut off, ended %q (open: %v); want lost", room, victim.Name, h.EndedCause, h.Open)
			}
		}
	}
}
