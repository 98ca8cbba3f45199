package lease

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

// TestClusterFailover kills the primary of a held room's slot on a
// Redis Cluster with replicas. The holder is told before its key could
// have expired, a lease on another primary's slot is kept throughout, and
// the room is acquired again, with a higher fence, from the promoted
// replica as soon as the cluster serves the slot: go-redis reloads its slot
// map by itself only on a redirect or once a minute, and a dead primary
// sends no redirect.
//
// The other primaries keep serving while the slot has no primary
// (cluster-require-full-coverage no): with the default, every node refuses
// every command for that while, and no lease of the Manager could be kept.
func TestClusterFailover(t *testing.T) {
	cl := redistest.StartClusterWith(t, redistest.ClusterConfig{Replicas: 1, NodeTimeout: time.Second,
		Args: []string{"--cluster-require-full-coverage", "no"}})
	c := cl.ClientWith(&redis.ClusterOptions{MaxRetries: 1, ContextTimeoutEnabled: true})
	cfg := testConfig()
	lostAt := make(chan time.Time, 1)
	cfg.OnLost = func(l *Lease, _ error) {
		select {
		case lostAt <- time.Now(): // the first: the room on the killed primary, or the check below fails
		default:
		}
	}
	m := startManager(t, c, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	victim, survivor := cl.Servers[0], cl.Servers[1]
	onVictim, onSurvivor := roomOn(t, ctx, cl, m, victim), roomOn(t, ctx, cl, m, survivor)
	l, err := m.Acquire(ctx, onVictim)
	require.NoError(t, err, "Acquire %s", onVictim)
	kept, err := m.Acquire(ctx, onSurvivor)
	require.NoError(t, err, "Acquire %s", onSurvivor)

	// Every renewal confirmed before the kill was sent before it, so the
	// key on the killed primary expires no later than killed + TTL.
	killed := time.Now()
	promoted, promotedAt := cl.Failover(ctx, victim)
	t.Logf("replica %s promoted %s after the kill", promoted.Addr, promotedAt.Sub(killed).Round(time.Millisecond))
	select {
	case at := <-lostAt:
		assert.Less(t, at.Sub(killed), cfg.TTL, "from the kill to OnLost; want before the key's TTL %s", cfg.TTL)
	case <-ctx.Done():
		require.FailNow(t, "lease on the killed primary never reported lost")
	}
	require.ErrorIs(t, context.Cause(l.Context()), ErrLost, "how the lease on the killed primary ended")

	var again *Lease
	waitFor(t, onVictim+" acquired again after the failover", func() bool {
		again, err = m.Acquire(ctx, onVictim)
		return err == nil
	})
	t.Logf("%s acquired again %s after the promotion", onVictim, time.Since(promotedAt).Round(time.Millisecond))
	assert.Greater(t, again.Token(), l.Token(), "fence after the failover; want above the lost lease's")
	assert.Equal(t, promoted, cl.PrimaryOf(ctx, again.key), "the primary the room was acquired on")
	assert.NoError(t, kept.Context().Err(), "lease on the surviving primary %s: want kept through the failover", survivor.Addr)
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
