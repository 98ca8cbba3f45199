package redistest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStartCluster(t *testing.T) {
	c := StartCluster(t)
	cl := c.Client()
	ctx := context.Background()
	// Keys spread over every node: writing and reading them back exercises
	// redirects and proves all slots are served.
	for i := range 100 {
		k := fmt.Sprintf("k%d", i)
		if err := cl.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatalf("set %s: %v", k, err)
		}
	}
	used := map[string]bool{}
	for i := range 100 {
		k := fmt.Sprintf("k%d", i)
		slot := int(cl.ClusterKeySlot(ctx, k).Val())
		used[c.Addrs[min(slot/(clusterSlots/3), 2)]] = true
		if got, err := cl.Get(ctx, k).Int(); err != nil || got != i {
			t.Fatalf("get %s = %d, %v; want %d, nil", k, got, err, i)
		}
	}
	if len(used) != 3 {
		t.Fatalf("keys landed on %d nodes; want 3", len(used))
	}
}

// A primary's replica takes over once the primary is killed, with the
// primary's data; a client seeded with the primaries alone reaches it.
func TestClusterFailover(t *testing.T) {
	c := StartClusterWith(t, ClusterConfig{Replicas: 1, NodeTimeout: time.Second, User: "u", Password: "p w"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := c.ClientWith(&redis.ClusterOptions{})
	require.NoError(t, cl.Set(ctx, "k", "v", 0).Err(), "SET k")
	old := c.PrimaryOf(ctx, "k")
	direct := nodeClient(old)
	defer direct.Close()
	n, err := direct.Do(ctx, "WAIT", 1, 5000).Int()
	require.NoError(t, err, "WAIT")
	require.Equal(t, 1, n, "replicas that acknowledged k")

	promoted, at := c.Failover(ctx, old)
	assert.NotZero(t, at, "time of the promotion")
	assert.Contains(t, c.Replicas[slices.Index(c.Servers, old)], promoted, "the promoted node is a replica of the killed primary")
	assert.Equal(t, promoted, c.PrimaryOf(ctx, "k"), "k's primary after the failover")
	cl.ReloadState(ctx)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got, err := cl.Get(ctx, "k").Result()
		assert.NoError(ct, err)
		assert.Equal(ct, "v", got)
	}, 10*time.Second, 50*time.Millisecond, "k read from the promoted replica")
}

// A planned failover promotes a replica with every write, and the old
// primary stays up as its replica.
func TestClusterFailoverPlanned(t *testing.T) {
	c := StartClusterWith(t, ClusterConfig{Replicas: 1, NodeTimeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := c.ClientWith(&redis.ClusterOptions{})
	require.NoError(t, cl.Set(ctx, "k", "v", 0).Err(), "SET k")
	old := c.PrimaryOf(ctx, "k")
	promoted, _ := c.FailoverPlanned(ctx, old)
	assert.Equal(t, promoted, c.PrimaryOf(ctx, "k"), "k's primary after the failover")
	assert.Equal(t, "slave", role(ctx, old), "the old primary's role")
	pc := nodeClient(promoted)
	defer pc.Close()
	got, err := pc.Get(ctx, "k").Result()
	require.NoError(t, err, "GET k on the promoted replica")
	assert.Equal(t, "v", got, "k on the promoted replica")
}

// Every slot of one primary moves to another, keys included.
func TestClusterMigrateSlots(t *testing.T) {
	c := StartCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := c.Client()
	for i := range 100 {
		require.NoError(t, cl.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err())
	}
	from, to := c.Servers[0], c.Servers[1]
	c.MigrateSlots(ctx, from, to)
	for i := range 100 {
		k := fmt.Sprintf("k%d", i)
		assert.NotEqual(t, from, c.PrimaryOf(ctx, k), "%s's primary after the migration", k)
		got, err := cl.Get(ctx, k).Int()
		assert.NoError(t, err, "GET %s", k)
		assert.Equal(t, i, got, "GET %s", k)
	}
}
