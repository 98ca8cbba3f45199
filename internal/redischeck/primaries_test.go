package redischeck

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
)

// servingOf keeps the listed nodes whose node id serves slots, and when it
// finds fewer than serve, names a node that did not answer: here the
// listed map holds a primary that is gone (as go-redis lists a failed
// one) besides the cluster's.
func TestServingOfMatchesNodeIDs(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := cl.Client()
	defer c.Close()
	//lint:ignore SA1019 the test reads what clusterPrimaries reads
	slots, err := c.ClusterSlots(ctx).Result()
	require.NoError(t, err)
	serving := map[string]string{}
	want := map[string]bool{}
	for _, r := range slots {
		serving[r.Nodes[0].ID] = r.Nodes[0].Addr
		want[r.Nodes[0].Addr] = true
	}
	gone := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t)), MaxRetries: -1, DialerRetries: 1})
	defer gone.Close()
	listed := []*redis.Client{gone}
	for addr := range want {
		n := redis.NewClient(&redis.Options{Addr: addr})
		defer n.Close()
		listed = append(listed, n)
	}

	got, _ := servingOf(ctx, listed, serving)
	assert.Len(t, got, len(want), "the primaries serving slots")
	for _, n := range got {
		assert.True(t, want[n.Options().Addr], "%s: not a primary serving slots", n.Options().Addr)
	}

	serving["no-such-node"] = "10.0.0.1:1"
	got, err = servingOf(ctx, listed, serving)
	assert.Len(t, got, len(want), "the primaries serving slots")
	assert.ErrorContains(t, err, gone.Options().Addr, "the node that did not answer")
}
