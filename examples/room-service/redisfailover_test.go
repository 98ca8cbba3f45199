package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
)

// TestClusterClientFollowsAFailover: the client REDIS_CLUSTER_URL builds
// reaches a killed primary's slots again once its replica took over,
// without a redirect or anyone else asking for a slot map reload (go-redis
// reloads by itself once a minute): room loads share this client with the
// leases, and would otherwise keep dialing the dead primary.
func TestClusterClientFollowsAFailover(t *testing.T) {
	cl := redistest.StartClusterWith(t, redistest.ClusterConfig{Replicas: 1, NodeTimeout: time.Second,
		Args: []string{"--cluster-require-full-coverage", "no"}})
	// A pool no count of failed dials fills: go-redis then starts a
	// background dial probe that outlives Close by up to a second (goleak).
	target, err := parseRedis(envClusterURL, cl.URL()+"&pool_size=1000")
	require.NoError(t, err)
	rdb := target.client()
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const key = "room:snapshot:{failover}"
	require.NoError(t, rdb.Set(ctx, key, "v", 0).Err(), "SET before the failover: the client loads its slot map")

	promoted, _ := cl.Failover(ctx, cl.PrimaryOf(ctx, key))
	converged := time.Now()

	// Ten seconds: a reload takes a round trip, and the cluster has
	// converged already (Failover waits for it); go-redis's own comes
	// after a minute.
	callCtx, cancelCalls := context.WithTimeout(ctx, 10*time.Second)
	defer cancelCalls()
	var last error
	for callCtx.Err() == nil {
		if last = rdb.Get(callCtx, key).Err(); last == nil || errors.Is(last, redis.Nil) { // served (nil: the SET was not replicated)
			t.Logf("served %s after the cluster converged", time.Since(converged).Round(time.Millisecond))
			return
		}
		select {
		case <-callCtx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("GET %s after %s was promoted: still failing after 10 s: %v", key, promoted.Addr, last)
}
