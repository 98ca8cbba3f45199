package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
)

// TestClusterClientFollowsAFailover: the client REDIS_CLUSTER_URL builds
// reaches a failed primary's slots again once its replica took over,
// without a redirect or anyone else asking for a slot map reload (go-redis
// reloads by itself once a minute): room loads share this client with the
// leases, and would otherwise keep calling the dead primary. A killed
// primary refuses connections; a paused one (a host gone, a partition)
// answers nothing, and holds go-redis's reload for its ReadTimeout. Calls
// on the client of a key's primary (MasterForKey's, which
// REDIS_WAIT_REPLICAS's writes use, as WAIT counts one connection's
// writes) follow it too, though the cluster client's hooks never see them.
func TestClusterClientFollowsAFailover(t *testing.T) {
	viaCluster := func(ctx context.Context, rdb *redis.ClusterClient, key string) error { return rdb.Get(ctx, key).Err() }
	viaPrimary := func(ctx context.Context, rdb *redis.ClusterClient, key string) error {
		primary, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			return err
		}
		return primary.Get(ctx, key).Err()
	}
	tests := []struct {
		name     string
		failover func(*redistest.Cluster, context.Context, *redistest.Server) (*redistest.Server, time.Time)
		call     func(ctx context.Context, rdb *redis.ClusterClient, key string) error
	}{
		{"killed", (*redistest.Cluster).Failover, viaCluster},
		{"paused", (*redistest.Cluster).FailoverPaused, viaCluster},
		{"planned", (*redistest.Cluster).FailoverPlanned, viaCluster},
		{"killed/the key's primary", (*redistest.Cluster).Failover, viaPrimary},
		{"paused/the key's primary", (*redistest.Cluster).FailoverPaused, viaPrimary},
		{"planned/the key's primary", (*redistest.Cluster).FailoverPlanned, viaPrimary},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { testClusterClientFollowsAFailover(t, tt.failover, tt.call) })
	}
}

func testClusterClientFollowsAFailover(t *testing.T, failover func(*redistest.Cluster, context.Context, *redistest.Server) (*redistest.Server, time.Time),
	call func(ctx context.Context, rdb *redis.ClusterClient, key string) error) {
	cl := redistest.StartClusterWith(t, redistest.ClusterConfig{Replicas: 1, NodeTimeout: time.Second,
		Args: []string{"--cluster-require-full-coverage", "no"}})
	// A pool too large for failed dials to reach PoolSize: go-redis then
	// starts a background dial probe that outlives Close by up to a second
	// (goleak).
	target, err := parseRedis(envClusterURL, cl.URL()+"&pool_size=1000")
	require.NoError(t, err)
	rdb := target.client().(*redis.ClusterClient)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const key = "room:snapshot:{failover}"
	require.NoError(t, rdb.Set(ctx, key, "v", 0).Err(), "SET before the failover: the client loads its slot map")

	promoted, _ := failover(cl, ctx, cl.PrimaryOf(ctx, key))
	converged := time.Now()

	// Once the cluster has converged (Failover waits for that), a reload
	// takes a round trip, or up to two clusterReadTimeouts more if it asks
	// the paused primary first, and go-redis waits 200 ms between reloads;
	// its own comes after a minute. Each call has a budget of its own.
	const within, callBudget = 3 * time.Second, 250 * time.Millisecond
	callCtx, cancelCalls := context.WithTimeout(ctx, within)
	defer cancelCalls()
	var last error // the last call's own error, not the loop's deadline
	for callCtx.Err() == nil {
		getCtx, cancelGet := context.WithTimeout(callCtx, callBudget)
		err := call(getCtx, rdb, key)
		cancelGet()
		if err == nil || errors.Is(err, redis.Nil) { // served (nil: the SET was not replicated)
			t.Logf("served %s after the cluster converged", time.Since(converged).Round(time.Millisecond))
			return
		}
		if callCtx.Err() == nil {
			last = err
		}
		select { // spacing between calls, not a wait for a condition
		case <-callCtx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("GET %s after %s was promoted: still failing %s after the cluster converged: %v", key, promoted.Addr, within, last)
}

// reply is an error reply from Redis, as go-redis returns one.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

func TestFailoverExplains(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		give error
		want bool
	}{
		{nil, false},
		{redis.Nil, false},
		{reply("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{reply("NOSCRIPT No matching script"), false},
		{context.Canceled, false},
		{fmt.Errorf("get: %w", redis.ErrClosed), false},
		{refused, true},
		{fmt.Errorf("get: %w", refused), true},
		{context.DeadlineExceeded, true},
		{redis.ErrPoolTimeout, true},
		{reply("CLUSTERDOWN The cluster is down"), true},
		{reply("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{reply("MOVED 3739 127.0.0.1:7001"), true},
		{reply("ASK 3739 127.0.0.1:7001"), false}, // a slot migrating: the map is right
	}
	for _, tt := range tests {
		if got := failoverExplains(tt.give); got != tt.want {
			t.Errorf("failoverExplains(%v) = %v; want %v", tt.give, got, tt.want)
		}
	}
}
