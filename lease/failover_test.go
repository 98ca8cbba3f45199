package lease

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
	"github.com/drainkit/drainkit/internal/testlog"
)

// TestClusterFailover kills or pauses primaries of a Redis Cluster with
// replicas under a Manager holding rooms. A primary serving only room routes costs
// nothing: the session lives elsewhere, so every lease is kept, and rooms
// of its slots are acquired again once the replica is promoted. The
// primary serving the node's session costs every lease, each told before
// the session could have expired in Redis; the Manager starts a new
// session on the promoted replica and takes its rooms again with higher
// fences. go-redis reloads its slot map by itself only on a redirect or
// once a minute, and a dead primary sends no redirect: the Manager asks.
//
// The other primaries keep serving while a slot has no primary
// (cluster-require-full-coverage no): with the default, every node refuses
// every command for that while, and the session would be lost either way.
func TestClusterFailover(t *testing.T) {
	tests := []struct {
		name   string
		paused bool
	}{
		// A killed primary refuses connections at once.
		{"killed", false},
		// A paused one (a host gone, a partition) takes connections and
		// answers nothing: every call to it ends at its timeout.
		{"paused", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { testClusterFailover(t, tt.paused) })
	}
}

func testClusterFailover(t *testing.T, paused bool) {
	cl := redistest.StartClusterWith(t, redistest.ClusterConfig{Replicas: 1, NodeTimeout: time.Second,
		Args: []string{"--cluster-require-full-coverage", "no"}})
	failover := cl.Failover
	if paused {
		failover = cl.FailoverPaused
	}
	cfg := testConfig()
	var logs testlog.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	// The client docs/leases.md gives: one dial, and go-redis's slot map
	// reload (it has no context) waits at most TTL/2 for a hung node (a
	// read of TTL/4, tried twice). PoolSize: see
	// TestPlaceThroughAFailoverOfTheIndexPrimary.
	c := cl.ClientWith(&redis.ClusterOptions{MaxRetries: 1, ContextTimeoutEnabled: true, DialerRetries: 1, PoolSize: 1000,
		ReadTimeout: cfg.TTL / 4, DialTimeout: cfg.TTL / 2})
	lostAt := make(chan time.Time, 1)
	cfg.OnLost = func(l *Lease, _ error) {
		select {
		case lostAt <- time.Now():
		default:
		}
	}
	m := startManager(t, c, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	session := cl.PrimaryOf(ctx, m.nodeKey())
	var routesOnly *redistest.Server
	for _, s := range cl.Servers {
		if s != session {
			routesOnly = s
			break
		}
	}
	onRoutes, onSession := roomOn(t, ctx, cl, m, routesOnly), roomOn(t, ctx, cl, m, session)
	kept, err := m.Acquire(ctx, onRoutes)
	require.NoError(t, err, "Acquire %s", onRoutes)
	l, err := m.Acquire(ctx, onSession)
	require.NoError(t, err, "Acquire %s", onSession)

	// The rooms were acquired just now: the test waits until the
	// replicas have them, or a kill could lose them (asynchronous
	// replication, docs/leases.md: Config.WaitReplicas is the lever).
	for _, p := range cl.Servers {
		waitReplicated(t, p.Client())
	}

	// A primary with routes only.
	promoted, promotedAt := failover(ctx, routesOnly)
	t.Logf("routes only: replica %s promoted %s", promoted.Addr, time.Since(promotedAt).Round(time.Millisecond))
	var ownerErr error
	ok := eventually(t, "Owner of "+onRoutes+" read from the promoted replica", func() bool {
		o, err := m.Owner(ctx, onRoutes)
		ownerErr = err
		return err == nil && o.Fence == kept.Token()
	})
	require.True(t, ok, "Owner of %s: last error %v", onRoutes, ownerErr)
	require.NoError(t, kept.Context().Err(), "lease of a room on the failed primary %s: want kept, its session lives elsewhere", routesOnly.Addr)
	require.NoError(t, l.Context().Err(), "lease of a room on the session's primary: want kept")
	if paused { // the partition heals: one hung node at a time
		cl.Resume(ctx, routesOnly)
	}
	other := roomOn(t, ctx, cl, m, promoted)
	_, err = m.Acquire(ctx, other)
	require.NoError(t, err, "Acquire of another room on the promoted replica")

	// The session's primary: the session is written before every
	// confirmed renewal's reply, so it expires no later than failed + TTL.
	failed := time.Now()
	promoted, promotedAt = failover(ctx, session)
	t.Logf("session: replica %s promoted %s after the primary failed", promoted.Addr, promotedAt.Sub(failed).Round(time.Millisecond))
	select {
	case at := <-lostAt:
		assert.Less(t, at.Sub(failed), cfg.TTL, "from the primary's failure to OnLost; want before the session's TTL %s", cfg.TTL)
	case <-ctx.Done():
		require.FailNow(t, "leases never reported lost after the session's primary failed")
	}
	// The renewal's failure names the primary at fault, not the seeds.
	assert.Contains(t, logs.String(), `msg="lease session renewal failed; its rooms are lost if none succeeds in time" node_id=`+cfg.Node+` redis_addr=`+session.Addr+` `)
	require.ErrorIs(t, context.Cause(l.Context()), ErrLost, "how the lease ended")
	require.ErrorIs(t, context.Cause(kept.Context()), ErrLost, "how the other lease ended: with the session")
	var again *Lease
	waitFor(t, onSession+" acquired again after the failover", func() bool {
		again, err = m.Acquire(ctx, onSession)
		return err == nil
	})
	took := time.Since(promotedAt)
	t.Logf("%s acquired again %s after the promotion", onSession, took.Round(time.Millisecond))
	// A reload that asks the hung primary first waits for it at most TTL/2,
	// and one that ran during the election may have mapped the slot to it
	// again, so two of them, go-redis's 200 ms between, then a tick's call
	// and the acquisition: under two TTLs. go-redis's default timeouts hold
	// one such reload 10 s. Three TTLs leave a loaded machine its margin.
	assert.Less(t, took, 3*cfg.TTL, "from the promotion to the room acquired again")
	assert.Greater(t, again.Token(), l.Token(), "fence after the failover; want above the lost lease's")
	assert.Greater(t, again.epoch, l.epoch, "epoch after the failover")
	assert.Equal(t, promoted, cl.PrimaryOf(ctx, m.nodeKey()), "the primary the new session is on")
}

// waitReplicated waits until every replica of primary has acknowledged
// what the primary had written when it was called (INFO replication's
// offsets).
func waitReplicated(t *testing.T, primary *redis.Client) {
	t.Helper()
	ctx := context.Background()
	field := func(info, name string) string {
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, name+":"); ok {
				return v
			}
		}
		return ""
	}
	info := primary.Info(ctx, "replication").Val()
	want, err := strconv.ParseInt(field(info, "master_repl_offset"), 10, 64)
	require.NoError(t, err, "master_repl_offset in %q", info)
	waitFor(t, "the replicas to acknowledge the primary's writes", func() bool {
		info := primary.Info(ctx, "replication").Val()
		n, _ := strconv.Atoi(field(info, "connected_slaves"))
		for i := range n {
			_, off, _ := strings.Cut(field(info, fmt.Sprintf("slave%d", i)), "offset=")
			off, _, _ = strings.Cut(off, ",")
			if got, err := strconv.ParseInt(off, 10, 64); err != nil || got < want {
				return false
			}
		}
		return n > 0
	})
}

// roomOn is a room id whose route key's slot s serves.
func roomOn(t *testing.T, ctx context.Context, cl *redistest.Cluster, m *Manager, s *redistest.Server) string {
	t.Helper()
	for i := range 1000 {
		id := fmt.Sprintf("fo-%d", i)
		if cl.PrimaryOf(ctx, m.routeKey(id)) == s {
			return id
		}
	}
	require.FailNow(t, "no room id among 1000 maps to "+s.Addr)
	return ""
}

// TestPlaceThroughAFailoverOfTheIndexPrimary kills the primary serving the
// index of sessions (room:node:index) while two nodes, whose sessions live
// on other primaries, keep theirs. A Place called once the primary is dead
// waits the failover out within its ctx and names the node it named
// before: the replica promoted has the index, and Place follows the new
// slot map. The client is the one docs/leases.md gives.
func TestPlaceThroughAFailoverOfTheIndexPrimary(t *testing.T) {
	cl := redistest.StartClusterWith(t, redistest.ClusterConfig{Replicas: 1, NodeTimeout: time.Second,
		Args: []string{"--cluster-require-full-coverage", "no"}})
	// PoolSize: a pool that saw that many failed dials probes the server once
	// a second on a goroutine of its own, which sees the client's Close only
	// when it wakes, after goleak has looked. Pools open connections as used.
	c := cl.ClientWith(&redis.ClusterOptions{MaxRetries: 1, ContextTimeoutEnabled: true, DialerRetries: 1, PoolSize: 1000,
		ReadTimeout: time.Second / 4, DialTimeout: time.Second / 2})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	probe, err := New(c, testConfig())
	require.NoError(t, err)
	index := cl.PrimaryOf(ctx, probe.indexKey())
	var ms []*Manager
	for len(ms) < 2 { // nodes whose sessions the kill leaves alone
		cfg := testConfig()
		if cl.PrimaryOf(ctx, probe.nodeKeyOf(cfg.Node)) != index {
			ms = append(ms, startManager(t, c, cfg))
		}
	}
	before := placements(t, ms...)
	for _, p := range cl.Servers {
		waitReplicated(t, p.Client())
	}

	killed := time.Now()
	placed := make(chan error, 1)
	go func() {
		select {
		case <-index.Done(): // Failover kills it
		case <-ctx.Done():
		}
		o, err := ms[0].Place(ctx, "place-0")
		if err == nil && o.Node != before["place-0"] {
			err = fmt.Errorf("placed on %q; want %q, as before the kill", o.Node, before["place-0"])
		}
		placed <- err
	}()
	promoted, promotedAt := cl.Failover(ctx, index)
	t.Logf("index: replica %s promoted %s after the kill", promoted.Addr, promotedAt.Sub(killed).Round(time.Millisecond))
	require.NoError(t, <-placed, "Place called at the kill")
	t.Logf("Place called at the kill returned %s after it", time.Since(killed).Round(time.Millisecond))
	for _, m := range ms {
		require.NoError(t, m.Probe(ctx), "%s: its session, on another primary, lives", m.cfg.Node)
	}
	assert.Equal(t, before, placements(t, ms...), "placements after the failover")
}

// A node started after a primary's failover, while the failed primary
// stays down, starts: the cluster serves every slot, and a failed node
// that serves none (go-redis from v9.24 lists it among the primaries,
// from CLUSTER SHARDS) is not one whose checks the start waits for.
func TestStartAfterAFailoverWhoseOldPrimaryStaysDown(t *testing.T) {
	for _, paused := range []bool{false, true} { // paused: it takes connections and answers nothing
		t.Run(fmt.Sprintf("paused=%v", paused), func(t *testing.T) { testStartAfterAFailover(t, paused) })
	}
}

func testStartAfterAFailover(t *testing.T, paused bool) {
	cl := redistest.StartClusterWith(t, redistest.ClusterConfig{Replicas: 1, NodeTimeout: time.Second,
		Args: []string{"--cluster-require-full-coverage", "no"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	failover := cl.Failover
	if paused {
		failover = cl.FailoverPaused
	}
	promoted, _ := failover(ctx, cl.Servers[0])
	t.Logf("%s down, %s promoted", cl.Servers[0].Addr, promoted.Addr)

	cfg := testConfig()
	c := cl.ClientWith(&redis.ClusterOptions{MaxRetries: 1, ContextTimeoutEnabled: true, DialerRetries: 1,
		ReadTimeout: cfg.TTL / 4, DialTimeout: cfg.TTL / 2})
	m, err := New(c, cfg)
	require.NoError(t, err)
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	start := time.Now()
	require.NoError(t, m.Start(sctx), "Start after the failover")
	t.Logf("started in %s", time.Since(start).Round(time.Millisecond))
	defer func() { require.NoError(t, m.Stop(context.Background())) }()
	l, err := m.Acquire(ctx, roomOn(t, ctx, cl, m, promoted))
	require.NoError(t, err, "Acquire of a room on the promoted replica")
	require.NoError(t, l.Context().Err())
}
