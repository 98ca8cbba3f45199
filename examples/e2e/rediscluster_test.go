package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/internal/e2e"
	"github.com/drainkit/drainkit/internal/redistest"
)

// The room-services on a Redis Cluster of three primaries with one replica
// each, configured as operators do: REDIS_CLUSTER_URL names the three
// primaries, credentials included, and cluster-node-timeout is 1 s.
// roomEnv is added to every room-service's environment.
func startOnRedisCluster(t *testing.T, roomEnv ...string) (*e2e.Cluster, *redistest.Cluster) {
	t.Helper()
	rc := redistest.StartClusterWith(t, redistest.ClusterConfig{Replicas: 1, NodeTimeout: time.Second,
		User: "room-service", Password: "e2e-s3cret"})
	return startServices(t, e2e.Config{RedisURL: rc.URL(), RedisVar: "REDIS_CLUSTER_URL", RoomEnv: roomEnv}), rc
}

// servedAgainWithin is how soon after its slot's replica was promoted a
// room is served again: the lease lost in the failover is taken again on
// the next command for the room, once the room-services' clients know the
// new primary (they reload the slot map on the first failed call).
const servedAgainWithin = 2 * time.Second

// TestRedisClusterPrimaryFailover SIGKILLs the primary that holds the most
// room leases, or SIGSTOPs it (a hung host, whose port takes connections
// and answers nothing: the room-services' clients wait out their
// ReadTimeout, room-service's 250 ms default, where a dead one refuses);
// the cluster promotes its replica by itself. Or an operator's planned
// failover (CLUSTER FAILOVER) with REDIS_WAIT_REPLICAS=1, whose writes go
// to the room's primary itself: the old one answers them MOVED, and WAIT
// counts the old primary once it replicates from the new one. Nothing is
// lost or applied twice, no command fails, and every room is served again
// within servedAgainWithin of the promotion.
func TestRedisClusterPrimaryFailover(t *testing.T) {
	for _, tt := range []struct {
		name    string
		how     string // killed, paused, planned
		roomEnv []string
	}{
		{"killed", "killed", nil},
		{"paused", "paused", nil},
		{"planned-wait-replicas", "planned", []string{"REDIS_WAIT_REPLICAS=1"}},
	} {
		t.Run(tt.name, func(t *testing.T) { clusterPrimaryFailover(t, tt.how, tt.roomEnv) })
	}
}

func clusterPrimaryFailover(t *testing.T, how string, roomEnv []string) {
	c, rc := startOnRedisCluster(t, roomEnv...)
	var promoted *redistest.Server
	var killed, promotedAt time.Time
	res, _ := faultUnderLoad(t, c, func(ctx context.Context) {
		victim := busiestPrimary(t, ctx, rc)
		failover := map[string]func(context.Context, *redistest.Server) (*redistest.Server, time.Time){
			"killed": rc.Failover, "paused": rc.FailoverPaused, "planned": rc.FailoverPlanned}[how]
		killed = time.Now()
		promoted, promotedAt = failover(ctx, victim)
		t.Logf("%s primary %s; replica %s promoted %s later", how, victim.Addr, promoted.Addr, promotedAt.Sub(killed).Round(time.Millisecond))
	})
	failover := promotedAt.Sub(killed)

	// A command sent before the promotion waits for it; from then on, its
	// room must be served within servedAgainWithin.
	var late time.Duration
	for _, o := range res.Outcomes {
		if o.Acked {
			late = max(late, o.Answered.Sub(maxTime(o.Sent, promotedAt)))
		}
	}
	fault := e2e.Window{From: killed, To: promotedAt.Add(servedAgainWithin)}
	r := check(t, c, res, nil, fault)
	t.Logf("latest answer after the promotion (or after its sending, if later): %s", late.Round(time.Millisecond))
	assert.LessOrEqual(t, late, servedAgainWithin, "a room served again later than %s after the promotion", servedAgainWithin)
	assert.LessOrEqual(t, r.Latency.P99, failover+1500*time.Millisecond,
		"p99 of the commands pending during the fault; want at most the failover (%s) + 1.5 s", failover.Round(time.Millisecond))
	assert.Zero(t, r.BalancerRetries, "balancer retries: no gateway went away, so none are the balancer's to make")
}

// TestRedisClusterSlotMigration moves every slot of the primary holding the
// most leases to another primary under load, with redis-cli --cluster
// reshard: no command fails.
func TestRedisClusterSlotMigration(t *testing.T) {
	c, rc := startOnRedisCluster(t)
	res, fault := faultUnderLoad(t, c, func(ctx context.Context) {
		from := busiestPrimary(t, ctx, rc)
		to := rc.Servers[0]
		if to == from {
			to = rc.Servers[1]
		}
		began := time.Now()
		rc.MigrateSlots(ctx, from, to)
		t.Logf("moved every slot of %s to %s in %s", from.Addr, to.Addr, time.Since(began).Round(time.Millisecond))
	})
	r := check(t, c, res, nil, fault)
	assert.Zero(t, r.BalancerRetries, "balancer retries: no gateway went away, so none are the balancer's to make")
}

// faultUnderLoad starts the load, waits for the steady state, runs fault,
// and keeps the load going for loadAfterRoll after it: the load spans the
// fault however long a loaded machine makes it. It returns the load's
// result and the fault's window.
func faultUnderLoad(t *testing.T, c *e2e.Cluster, fault func(ctx context.Context)) (*e2e.LoadResult, e2e.Window) {
	t.Helper()
	stop := make(chan struct{})
	wait := load(t, c, e2e.Load{Duration: 2 * bound, Until: stop})
	ctx, cancel := context.WithTimeout(context.Background(), 2*bound) // steady, then the fault
	defer cancel()
	steady(t, ctx, c)
	w := e2e.Window{From: time.Now()}
	fault(ctx)
	w.To = time.Now()
	<-time.After(loadAfterRoll) // the load's length after the fault is the scenario, not a wait for a condition
	close(stop)
	res := wait()
	require.True(t, res.LastSent.After(w.To), "the load ended before the fault did: it spanned nothing")
	return res, w
}

// busiestPrimary is the primary that holds the most room:route keys.
func busiestPrimary(t *testing.T, ctx context.Context, rc *redistest.Cluster) *redistest.Server {
	t.Helper()
	var best *redistest.Server
	most := -1
	for _, s := range rc.Servers {
		keys, err := s.Client().Keys(ctx, "room:route:*").Result() // a test's few dozen keys
		require.NoError(t, err, "KEYS room:route:* on %s", s.Addr)
		if len(keys) > most {
			best, most = s, len(keys)
		}
	}
	require.Positive(t, most, "room:route keys on the busiest primary: with none, the fault would test nothing")
	t.Logf("busiest primary %s holds %d room:route keys", best.Addr, most)
	return best
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
