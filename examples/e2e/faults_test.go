package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/internal/e2e"
	"github.com/drainkit/drainkit/internal/harness"
	"github.com/drainkit/drainkit/readiness"
)

// notReadyWithin bounds the time from Redis stopping to a room-service
// answering not-ready: "within one probe period" of the harness. Readiness
// answers from its last evaluation while a new one runs (no probe waits
// for a check), so after Redis stops the old "ready" answers until it is
// older than the cache TTL, the evaluation a probe then starts fails when
// its checks time out (bounded by the ready timeout, which caps every
// check's), and the next probe sees it: at most a probe period later.
// Computed from the configuration the processes run with, so a change
// there moves the bound; no slack is added for a loaded machine. (With
// Kubernetes' default 10 s period the same sum says: on the next probe.)
const notReadyWithin = readiness.DefaultCacheTTL + readiness.DefaultReadyTimeout + harness.ProbeInterval

// outage is how long Redis stays stopped: longer than the lease TTL, so
// every lease is lost.
const outage = 3 * time.Second

// probes polls the room-services' verbose ready bodies and liveness until
// stop is closed: when each first answered not-ready (or not at all),
// every ready answer other than 200 with the gating checks it named, and
// every liveness answer other than 200.
type probes struct {
	mu       sync.Mutex
	notReady map[string]time.Time
	bodies   []notReadyBody
	liveBad  []string
	live     int // liveness answers checked
	exempt   int // liveness probes unanswered while their process was stopped
	wg       sync.WaitGroup
}

// notReadyBody is one ready answer other than 200 and the gating checks it
// named.
type notReadyBody struct {
	node    string
	code    int
	failing []string
}

// A liveness probe that got no answer while its process was stopped (see
// e2e.Cluster.Pause) is exempt: nothing answers a stopped process. Any
// answer but 200 is a failure.
// roomOnStopTimeout is room-service's fx.StopTimeout (its main.go): what
// fx's OnStop hooks get after the drain.
const roomOnStopTimeout = 5 * time.Second

func watchProbes(c *e2e.Cluster, nodes []*e2e.Node, stop <-chan struct{}) *probes {
	p := &probes{notReady: map[string]time.Time{}}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, n := range nodes {
		p.wg.Go(func() {
			for {
				code, failing, err := readyAnswer(client, n)
				p.mu.Lock()
				if _, ok := p.notReady[n.Name]; !ok && code != http.StatusOK {
					p.notReady[n.Name] = time.Now()
				}
				if code != 0 && (code != http.StatusOK || err != nil) {
					p.bodies = append(p.bodies, notReadyBody{n.Name, code, failing})
				}
				p.mu.Unlock()
				sent := time.Now()
				code = get(client, "http://"+n.Admin+"/healthz/live")
				p.mu.Lock()
				switch {
				case code == 0 && c.StoppedDuring(n.Name, sent, time.Now()):
					p.exempt++
				case code != http.StatusOK:
					p.liveBad = append(p.liveBad, fmt.Sprintf("%s at %s: %d %s", n.Name, sent.Format("15:04:05.000"), code, http.StatusText(code)))
				default:
					p.live++
				}
				p.mu.Unlock()
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond): // probing external processes
				}
			}
		})
	}
	return p
}

// readyAnswer is n's verbose ready answer: its status code (0 if none
// came), the gating checks it names failing, and an error if no answer
// came or its body was not a report.
func readyAnswer(c *http.Client, n *e2e.Node) (int, []string, error) {
	resp, err := c.Get("http://" + n.Admin + "/healthz/ready?verbose=1")
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var b struct{ Checks []readyCheck }
	err = json.NewDecoder(resp.Body).Decode(&b)
	return resp.StatusCode, failingGating(b.Checks), err
}

func get(c *http.Client, url string) int {
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestRedisOutage(t *testing.T) { redisOutage(t, outage, e2e.Config{}) }

// snapshotInterval is the room-services' SNAPSHOT_INTERVAL in the long
// outage; their longest watchdog budget is then the room loop's, three
// intervals (room-service's rooms.go; the outbox worker's is 2.4 s).
const (
	snapshotInterval = time.Second
	longestWatchdog  = 3 * snapshotInterval
)

// Redis frozen for three times the longest watchdog budget: every loop
// that waits on it stays alive, so liveness stays 200 (no restart storm)
// while readiness fails, and the gateways wait the outage out.
func TestRedisOutageLongerThanTheWatchdogs(t *testing.T) {
	long := 3 * longestWatchdog
	redisOutage(t, long, e2e.Config{
		RoomEnv:        []string{"SNAPSHOT_INTERVAL=" + snapshotInterval.String()},
		RequestTimeout: long + e2e.DefaultRequestTimeout,
	})
}

// redisOutage stops Redis for length under load, with the cluster cfg.
func redisOutage(t *testing.T, length time.Duration, cfg e2e.Config) {
	c, rs := startCluster(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	wait := loadPastSteady(t, ctx, c, length+3*time.Second)

	nodes := c.Rooms()
	stop := make(chan struct{})
	pausedAt := time.Now()
	rs.Pause()
	p := watchProbes(c, nodes, stop)
	<-time.After(length) // the fault's length is the scenario, not a wait for a condition
	rs.Resume()
	fault := e2e.Window{From: pausedAt, To: time.Now()}
	close(stop)
	p.wg.Wait()
	for _, n := range nodes {
		require.NoError(t, c.AwaitReady(ctx, n), "readiness did not recover")
	}
	res := wait()
	r := check(t, c, res, nil, fault)

	for _, n := range nodes {
		at, ok := p.notReady[n.Name]
		assert.True(t, ok && at.Sub(pausedAt) <= notReadyWithin,
			"%s: not ready %s after Redis stopped (seen: %v); want within %s", n.Name, at.Sub(pausedAt), ok, notReadyWithin)
	}
	liveThroughout(t, p)
	held := 0
	for room, hs := range r.Holds {
		for _, h := range hs {
			if !h.From.Before(pausedAt) || (!h.Open && h.To.Before(pausedAt)) {
				continue
			}
			held++
			switch {
			// A lease is lost, or released by a balance hand-off whose
			// flush came just before Redis stopped (the lease ends where
			// it is held before the release reaches Redis).
			case h.Open || !strings.Contains(h.EndedCause, "lost") && !strings.Contains(h.EndedCause, "released"):
				assert.Failf(t, "lease held at the outage not lost",
					"room %s on %s: held at the outage, ended %q; want lost (or released)", room, h.Node, h.EndedCause)
			case h.To.Sub(pausedAt) >= e2e.DefaultLeaseTTL:
				assert.Failf(t, "lease lost too late",
					"room %s on %s: reported lost %s after Redis stopped; want before the TTL (%s)",
					room, h.Node, h.To.Sub(pausedAt), e2e.DefaultLeaseTTL)
			}
		}
	}
	assert.NotZero(t, held, "leases held when Redis stopped: with none, the scenario tested nothing")
}

func TestRedisStopsDuringDrain(t *testing.T) {
	const drainTimeout = 4 * time.Second
	c, rs := startCluster(t, e2e.Config{DrainTimeout: drainTimeout})
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	wait := loadPastSteady(t, ctx, c, 6*time.Second)

	victim := c.Busiest()
	require.NoError(t, victim.Signal(syscall.SIGTERM), "SIGTERM %s", victim.Name)
	_, err := victim.Await(ctx, `"new_status":"draining"`)
	require.NoError(t, err, "%s: await draining", victim.Name)
	fault := e2e.Window{From: time.Now()}
	rs.Pause()
	code, err := victim.Wait(ctx)
	rs.Resume()
	fault.To = time.Now()
	require.NoError(t, err, "wait for %s to exit", victim.Name)
	d := e2e.Drained{Name: victim.Name, ExitCode: code, DrainTime: victim.DrainTime()}
	for _, n := range c.Rooms() {
		if n != victim {
			require.NoError(t, c.AwaitReady(ctx, n), "readiness did not recover")
		}
	}
	res := wait()
	r := check(t, c, res, []e2e.Drained{d}, fault)

	// The deadline bounds the process, not only the drain's hooks: after
	// it, fx's OnStop hooks (closing clients) get room-service's fx.StopTimeout and no more,
	// however long Redis stays away; an orchestrator SIGKILLs at its grace
	// period, which DRAIN_TIMEOUT + that is set to fit.
	limit := drainTimeout + roomOnStopTimeout + time.Second
	assert.LessOrEqual(t, d.DrainTime, limit,
		"%s exited %s after SIGTERM; want within DRAIN_TIMEOUT %s + fx.StopTimeout %s (+1 s to exit): work after the drain's deadline still waits on Redis",
		d.Name, d.DrainTime.Round(time.Millisecond), drainTimeout, roomOnStopTimeout)
	assert.Contains(t, []int{3, 1}, code,
		"%s exit code; want 3 (deadline) or 1 (a hook failed): a drain that could not flush is not clean", d.Name)
	// Only the holds that ended once Redis stopped: before that, the
	// victim may have handed rooms off towards their balanced node, each
	// flushed and then released, as it should.
	released := 0
	for _, hs := range r.Holds {
		for _, h := range hs {
			if h.Node == victim.Name && !h.To.Before(fault.From) && strings.Contains(h.EndedCause, "released") {
				released++
			}
		}
	}
	assert.Zero(t, released, "%s: leases released while Redis was stopped; want every unflushed room left to expire", victim.Name)
}

// TestCrashTakenOverAfterTTL runs the crash at two lease TTLs: today's,
// and half of it, which halves the gap after a crash at the cost of twice
// the renewals. Each reports the gap and Redis's command rate at steady
// state under the same load, so the two costs can be compared.
func TestCrashTakenOverAfterTTL(t *testing.T) {
	for _, ttl := range []time.Duration{e2e.DefaultLeaseTTL, e2e.DefaultLeaseTTL / 2} {
		t.Run("TTL_"+ttl.String(), func(t *testing.T) { crashTakenOver(t, ttl) })
	}
}

// steadyWindow is how long Redis's command rate is measured at steady
// state: several renewal periods at either TTL.
const steadyWindow = 2 * time.Second

func crashTakenOver(t *testing.T, ttl time.Duration) {
	c, rs := startCluster(t, e2e.Config{LeaseTTL: ttl})
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	wait := loadPastSteady(t, ctx, c, 6*time.Second+steadyWindow)
	rate, err := commandRate(ctx, rs.Client(), steadyWindow)
	require.NoError(t, err, "Redis's command rate at steady state")
	t.Logf("LEASE_TTL=%s: Redis at steady state: %.0f commands/s", ttl, rate)
	victim := c.Busiest()
	killedAt := c.Crash(victim)
	// The fault lasts until every room the victim held has a new owner:
	// requests for them wait that long.
	require.NoError(t, c.AwaitTakenOver(ctx, victim.Name), "await the take-over of %s's rooms", victim.Name)
	fault := e2e.Window{From: killedAt, To: time.Now()}
	res := wait()
	r := check(t, c, res, nil, fault)

	// earliest is the soonest another node may acquire a room the victim
	// held. The victim's renewer re-arms every lease each TTL/3, and
	// Redis keeps a key TTL after a renewal was sent (the PEXPIRE is
	// applied after it). So while the victim ran, every key it held had
	// more than TTL − TTL/3 = TTL·2/3 to live; killedAt is taken before
	// SIGKILL was sent, so at killedAt too, and no key expired before
	// killedAt + TTL·2/3. Another node's acquire needs the key gone, and
	// its "acquired" event is logged after the acquire returned: an
	// acquisition logged earlier took over a lease that was still valid.
	// (This assumes the renewer's tick is on time: a renewal late by d
	// lowers the bound by d, which this check would report.)
	earliest := killedAt.Add(ttl * 2 / 3)
	orphaned, takenOver := 0, 0
	for room, hs := range r.Holds {
		for i, h := range hs {
			if h.Node != victim.Name || h.EndedCause != "process exited" {
				continue
			}
			orphaned++
			if i+1 == len(hs) {
				assert.Failf(t, "room never taken over", "room %s: owned by %s when it crashed, never taken over", room, victim.Name)
				continue
			}
			next := hs[i+1]
			takenOver++
			gap := next.From.Sub(killedAt)
			assert.False(t, next.From.Before(earliest),
				"room %s: taken over by %s %s after the kill; want no earlier than TTL·2/3 (%s): a valid lease was taken over",
				room, next.Node, gap, ttl*2/3)
			assert.LessOrEqual(t, gap, ttl+2*time.Second, "room %s: time from the crash to its take-over; want within the TTL %s (+2 s)", room, ttl)
		}
	}
	assert.NotZero(t, orphaned, "rooms %s held when it crashed: with none, the scenario tested nothing", victim.Name)
	t.Logf("LEASE_TTL=%s: %d rooms owned by the crashed node, %d taken over; hand-over gaps %s", ttl, orphaned, takenOver, r.Gap)
}

// commandRate is the commands a second Redis processed over window, from
// INFO's total_commands_processed (the measurement's own two INFO calls
// included).
func commandRate(ctx context.Context, rdb *redis.Client, window time.Duration) (float64, error) {
	read := func() (int64, time.Time, error) {
		info, err := rdb.Info(ctx, "stats").Result()
		if err != nil {
			return 0, time.Time{}, err
		}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				return n, time.Now(), err
			}
		}
		return 0, time.Time{}, fmt.Errorf("no total_commands_processed in INFO stats")
	}
	n0, t0, err := read()
	if err != nil {
		return 0, err
	}
	<-time.After(window) // the measurement's length, not a wait for a condition
	n1, t1, err := read()
	if err != nil {
		return 0, err
	}
	return float64(n1-n0) / t1.Sub(t0).Seconds(), nil
}

// TestTwoSIGTERMs: a second SIGTERM cuts a room-service's drain short
// (exit 4): its rooms are not flushed, and the forced drain ends the
// node's session, one call that frees them all: other nodes take them at
// once, not after the TTL (per-room leases were left to expire).
func TestTwoSIGTERMs(t *testing.T) {
	c, _ := startCluster(t, e2e.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	wait := loadPastSteady(t, ctx, c, 6*time.Second)
	victim := c.Busiest()
	fault := e2e.Window{From: time.Now()}
	require.NoError(t, victim.Signal(syscall.SIGTERM), "first SIGTERM to %s", victim.Name)
	_, err := victim.Await(ctx, `"new_status":"draining"`)
	require.NoError(t, err, "%s: await draining", victim.Name)
	require.NoError(t, victim.Signal(syscall.SIGTERM), "second SIGTERM to %s", victim.Name)
	code, err := victim.Wait(ctx)
	require.NoError(t, err, "wait for %s to exit", victim.Name)
	require.NoError(t, c.AwaitTakenOver(ctx, victim.Name), "await the take-over of %s's rooms", victim.Name)
	fault.To = time.Now()
	res := wait()
	r := check(t, c, res, []e2e.Drained{{Name: victim.Name, ExitCode: code, DrainTime: victim.DrainTime()}}, fault)
	assert.Equal(t, 4, code, "%s: exit code after two SIGTERMs; want 4 (forced)", victim.Name)
	// No room waited for a session to expire: the earliest a room of an
	// unended session could move is TTL·2/3 after its node stopped renewing.
	assert.Less(t, r.Gap.Max, e2e.DefaultLeaseTTL*2/3, "longest hand-over gap (%s); want the rooms freed by the forced drain, not by expiry", r.Gap)
}
