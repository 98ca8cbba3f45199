package lease

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
)

// logBuffer is a concurrency-safe log sink for asserting warnings.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestStartChecksServer: a server that may evict lease keys is refused
// unless the risk is accepted explicitly, and what cannot be checked is
// warned about, naming the setting.
func TestStartChecksServer(t *testing.T) {
	tests := []struct {
		name    string
		args    []string // redis-server arguments
		accept  bool     // Config.AcceptEviction
		wantErr string   // substring of Start's error; "" for success
		wantLog string   // substring of the log; "" for none
	}{
		{"noeviction", nil, false, "", ""},
		{"allkeys-lru", []string{"--maxmemory-policy", "allkeys-lru"}, false, "maxmemory-policy allkeys-lru", ""},
		{"volatile-ttl", []string{"--maxmemory-policy", "volatile-ttl"}, false, "maxmemory-policy volatile-ttl", ""},
		{"evicting, accepted", []string{"--maxmemory-policy", "allkeys-lru"}, true, "", "maxmemory-policy"},
		{"INFO and CONFIG refused", []string{"--rename-command", "INFO", "", "--rename-command", "CONFIG", ""}, false, "", "maxmemory-policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t, tt.args...)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: 1, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			var logs logBuffer
			cfg := testConfig()
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			cfg.AcceptEviction = tt.accept
			m, err := New(c, cfg)
			require.NoError(t, err, "New")
			err = m.Start(context.Background())
			if err == nil {
				t.Cleanup(func() { _ = m.Stop(context.Background()) })
			}
			if tt.wantErr == "" {
				require.NoError(t, err, "Start")
			} else {
				require.ErrorContains(t, err, tt.wantErr, "Start")
				require.ErrorIs(t, err, ErrUnsafeServer, "Start")
			}
			// The server answers: nothing is waited for, whatever it refuses.
			assert.NotContains(t, logs.String(), "waiting for Redis", "log")
			if slices.Contains(tt.args, "INFO") { // the version's warning gives INFO's refusal, not CONFIG's
				assert.Regexp(t, "cannot read the Redis version.*error=\"ERR unknown command .info.", logs.String())
			}
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "level=WARN") {
					assert.Regexp(t, " node_id="+cfg.Node+"( |$)", line, "a warning names the node, as every lease line does")
				}
			}
			if tt.wantLog != "" {
				assert.Contains(t, logs.String(), tt.wantLog, "log: want a warning naming the setting")
			} else {
				assert.NotContains(t, logs.String(), "maxmemory-policy", "log: want no warning about maxmemory-policy")
			}
		})
	}
}

// TestWaitReplicas: with Config.WaitReplicas, Acquire returns a lease only
// once that many replicas hold it; short of them, the lease is released
// and the error names the setting, also after the server forgot the
// scripts. The TTL is 6 s so that WAIT gets about
// half a second (half of CallTimeout, TTL/6): with a 1 s TTL it got about
// 83 ms, which a loaded machine's replica misses now and then.
func TestWaitReplicas(t *testing.T) {
	// Redis 7 waits 5 s (repl-diskless-sync-delay) before a diskless
	// full sync, as long as waitFor's whole budget: start at once.
	primary := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))
	rc := replica.Client()
	waitFor(t, "the replica to sync", func() bool {
		info, _ := rc.Info(context.Background(), "replication").Result()
		return strings.Contains(info, "master_link_status:up")
	})
	c := redis.NewClient(&redis.Options{Addr: primary.Addr, MaxRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	// "link up" is said before the replica acknowledges its first write;
	// one acknowledged write (with a generous WAIT of the test's own) makes
	// the stream the lease's WAIT will find a steady one.
	require.NoError(t, c.Set(ctx, "warm-up", 1, 0).Err())
	n, err := c.Do(ctx, "WAIT", 1, 10_000).Int()
	require.NoError(t, err, "WAIT 1 for a warm-up write")
	require.Equal(t, 1, n, "WAIT 1 for a warm-up write")

	cfg := testConfig()
	cfg.TTL = 6 * time.Second
	cfg.WaitReplicas = 1
	m := startManager(t, c, cfg)
	l, err := m.Acquire(ctx, "waited")
	require.NoError(t, err, "Acquire with WaitReplicas 1 and one replica")
	require.Equal(t, l.value, rc.Get(ctx, l.key).Val(), "the replica's value right after Acquire")
	// A promoted replica has an empty script cache: the acquisition goes
	// again as EVAL, and its WAIT after it, in one pipeline.
	var mu sync.Mutex
	var pipelines [][]string
	c.AddHook(pipelineHook{fn: func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		names := make([]string, len(cmds))
		for i, cmd := range cmds {
			names[i] = cmd.Name()
		}
		mu.Lock()
		pipelines = append(pipelines, names)
		mu.Unlock()
		return next(ctx, cmds)
	}})
	require.NoError(t, c.ScriptFlush(ctx).Err(), "SCRIPT FLUSH")
	l, err = m.Acquire(ctx, "waited-after-flush")
	require.NoError(t, err, "Acquire with WaitReplicas 1 after SCRIPT FLUSH")
	require.Equal(t, l.value, rc.Get(ctx, l.key).Val(), "the replica's value right after Acquire after SCRIPT FLUSH")
	mu.Lock()
	require.Equal(t, [][]string{{"evalsha", "wait"}, {"eval", "wait"}}, pipelines, "pipelines of the acquisition after SCRIPT FLUSH")
	mu.Unlock()

	cfg = testConfig()
	cfg.TTL = 6 * time.Second
	cfg.WaitReplicas = 2
	m2 := startManager(t, c, cfg)
	_, err = m2.Acquire(ctx, "short")
	require.ErrorContains(t, err, "WaitReplicas 2", "Acquire with WaitReplicas 2 and one replica")
	require.Zero(t, c.Exists(ctx, m2.routeKey("short")).Val(), "key exists after a short WAIT; want the lease released")
	require.Empty(t, m2.snapshot(), "leases held after a short WAIT; want the lease released")
}

// TestWaitReplicasFollowsAMovedSlot: with WaitReplicas on Cluster the
// script goes to the room's primary directly, outside the cluster
// client's redirect handling; after the room's slot moved, the MOVED
// reply must refresh the slot map and the attempt go to the new owner.
// The cluster has no replicas, so the attempt that reaches the right
// primary fails with a short WAIT: the error tells which node answered.
func TestWaitReplicasFollowsAMovedSlot(t *testing.T) {
	cl := redistest.StartCluster(t)
	c := cl.ClientWith(&redis.ClusterOptions{MaxRetries: 1, ContextTimeoutEnabled: true})
	cfg := testConfig()
	cfg.TTL = 6 * time.Second
	cfg.WaitReplicas = 1
	m := startManager(t, c, cfg) // Start loads the slot map
	ctx := context.Background()
	key := m.routeKey("moved")
	owner, err := c.MasterForKey(ctx, key)
	require.NoError(t, err, "MasterForKey")
	var target *redistest.Server
	for _, s := range cl.Servers {
		if s.Addr != owner.Options().Addr {
			target = s
			break
		}
	}
	tc := target.Client()
	targetID, err := tc.ClusterMyID(ctx).Result()
	require.NoError(t, err, "CLUSTER MYID")
	// Move the (empty) slot: the new owner first, then the others. The new
	// owner's claim carries its config epoch, which may be below the old
	// owner's: gossip the old owner sent before its own SETSLOT would then
	// take the slot back on the new owner, and the two would answer MOVED
	// to each other for good. So the new owner bumps its epoch, and claims
	// the slot again until every node agrees on it.
	slot, err := tc.ClusterKeySlot(ctx, key).Result()
	require.NoError(t, err, "CLUSTER KEYSLOT")
	claim := func() {
		for _, args := range [][]any{{"CLUSTER", "SETSLOT", slot, "NODE", targetID}, {"CLUSTER", "BUMPEPOCH"}} {
			require.NoError(t, tc.Do(ctx, args...).Err(), "%v on %s", args, target.Addr)
		}
	}
	claim()
	var others []*redis.Client
	for _, s := range cl.Servers {
		if s != target {
			err := s.Client().Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", targetID).Err()
			require.NoError(t, err, "CLUSTER SETSLOT on %s", s.Addr)
			others = append(others, s.Client())
		}
	}
	waitFor(t, "every node to agree on the slot's new owner", func() bool {
		if err := tc.Get(ctx, key).Err(); !errors.Is(err, redis.Nil) {
			claim() // taken back by stale gossip
			return false
		}
		for _, o := range others {
			if err := o.Get(ctx, key).Err(); err == nil || !redis.HasErrorPrefix(err, "MOVED") || !strings.HasSuffix(err.Error(), " "+target.Addr) {
				return false
			}
		}
		return true
	})

	_, err = m.Acquire(ctx, "moved")
	require.ErrorContains(t, err, "WaitReplicas 1", "Acquire after the slot moved: want the new owner's short WAIT")
	assert.Zero(t, tc.Exists(ctx, key).Val(), "new owner holds %s after the short WAIT; want it released", key)
}

// TestStartChecksEveryPrimaryOfAFormingCluster: a seed that serves only
// some slots (a cluster still forming) lists only some primaries. Start
// waits until every slot is served, then checks every primary: one with an
// evicting policy that joined late is refused, not left unchecked.
func TestStartChecksEveryPrimaryOfAFormingCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Without full coverage the seed serves its own slots: a session can start.
	seed := redistest.StartClusterNode(t, "--cluster-require-full-coverage", "no")
	late := redistest.StartClusterNode(t, "--cluster-require-full-coverage", "no", "--maxmemory-policy", "allkeys-lru")
	seedClient, lateClient := seed.Client(), late.Client()
	cfg := testConfig()
	// The seed serves the session key's slot: a Start that checks only the
	// primaries the seed lists finishes without the other.
	slot, err := seedClient.ClusterKeySlot(ctx, DefaultNodePrefix+"{"+cfg.Node+"}").Result()
	require.NoError(t, err)
	own, other := [2]int64{0, 8191}, [2]int64{8192, 16383}
	if slot > 8191 {
		own, other = other, own
	}
	require.NoError(t, seedClient.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", own[0], own[1]).Err())
	require.NoError(t, lateClient.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", other[0], other[1]).Err())

	m, started := startWaiting(t, ctx, seed, cfg, "slots served", "while the cluster served half its slots: the other primary went unchecked")
	redistest.Meet(t, ctx, seed, late)
	err = <-started
	require.ErrorIs(t, err, ErrUnsafeServer)
	assert.ErrorContains(t, err, late.Addr+" has maxmemory-policy allkeys-lru")
	require.NoError(t, m.Stop(ctx))
}

// startWaiting starts a Manager of cfg on a Cluster client seeded with
// seed, and returns once Start has logged a line containing waiting; Start
// returning first fails the test, saying it returned early.
func startWaiting(t *testing.T, ctx context.Context, seed *redistest.Server, cfg Config, waiting, early string) (*Manager, <-chan error) {
	t.Helper()
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{seed.Addr}, MaxRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	w := &matchWriter{match: waiting, seen: make(chan struct{})}
	cfg.Logger = slog.New(slog.NewTextHandler(w, nil))
	m, err := New(client, cfg)
	require.NoError(t, err)
	started := make(chan error, 1)
	go func() { started <- m.Start(ctx) }()
	select {
	case err := <-started:
		t.Fatalf("Start returned %v %s", err, early)
	case <-w.seen:
	}
	return m, started
}

// matchWriter closes seen at the first write that contains match.
type matchWriter struct {
	match string
	seen  chan struct{}
	once  sync.Once
}

func (w *matchWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.match) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// A cluster with no slot assigned yet (its nodes started, the cluster not
// created) is waited for like a server not reachable yet: Start goes on
// once the slots are assigned, instead of failing at once on go-redis's
// "cluster has no nodes".
func TestStartWaitsForAClusterWithNoSlotYet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node := redistest.StartClusterNode(t)
	m, started := startWaiting(t, ctx, node, testConfig(), "no slot is served yet", "before any slot was assigned")
	require.NoError(t, node.Client().Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err())
	require.NoError(t, <-started)
	require.NoError(t, m.Stop(ctx))
}
