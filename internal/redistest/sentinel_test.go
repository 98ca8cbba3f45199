package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The sentinel's failover promotes the replica, with the primary's data,
// and a failover client follows it there.
func TestSentinelFailover(t *testing.T) {
	s := StartSentinel(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.Client()
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err(), "SET k")
	old := s.Primary(ctx)
	n, err := old.Client().Do(ctx, "WAIT", 1, 5000).Int()
	require.NoError(t, err, "WAIT")
	require.Equal(t, 1, n, "replicas that acknowledged k")

	promoted := s.Failover(ctx)
	assert.NotEqual(t, old, promoted, "the primary after the failover")
	assert.Equal(t, promoted, s.Primary(ctx))
	assert.Equal(t, "v", promoted.Client().Get(ctx, "k").Val(), "k on the promoted replica")
	// go-redis switches when the sentinel announces the new primary; until
	// then its writes reach the old one, and are lost with it.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.NoError(ct, c.Set(ctx, "k2", "v2", 0).Err(), "a write through the failover client")
		assert.Equal(ct, "v2", promoted.Client().Get(ctx, "k2").Val(), "k2 on the promoted replica")
	}, 10*time.Second, 50*time.Millisecond, "the failover client writes to the promoted replica")
}
