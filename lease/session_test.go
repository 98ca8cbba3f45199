package lease

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEpochNeverReused: every session the node id starts has a larger
// epoch than any before it: after a clean stop, after the session was lost
// in Redis (the key deleted: data loss), and when the server's clock is
// behind the last epoch this process had.
func TestEpochNeverReused(t *testing.T) {
	c := standalone(t).client()
	ctx := context.Background()
	cfg := testConfig()
	cfg.TTL = time.Minute // the test drives the renewal
	var last int64
	next := func(step string, m *Manager) {
		t.Helper()
		s := m.sess.Load()
		require.NotNil(t, s, "%s: no session", step)
		require.Greater(t, s.epoch, last, "%s: epoch", step)
		last = s.epoch
	}
	m := startManager(t, c, cfg)
	next("first start", m)
	require.NoError(t, m.Stop(ctx))
	m = startManager(t, c, cfg) // the same node id, a new process
	next("after a clean stop", m)
	require.NoError(t, c.Del(ctx, m.nodeKey()).Err())
	require.ErrorIs(t, m.tick(ctx), errSessionLost, "renewal of a deleted session")
	next("after the session was lost in Redis", m)

	ahead := time.Now().Add(time.Hour).UnixMicro() // an epoch issued by a clock an hour ahead
	m.lastEpoch.Store(ahead)
	require.NoError(t, c.Del(ctx, m.nodeKey()).Err())
	require.ErrorIs(t, m.tick(ctx), errSessionLost, "renewal of a deleted session")
	last = ahead
	next("with the server's clock behind the last epoch", m)
}

// TestDeadSessionsRoomIsTaken: a room whose route names a session that
// ended (gone in Redis, or replaced by a later epoch of its node) is taken
// at once by another node, with a higher fence.
func TestDeadSessionsRoomIsTaken(t *testing.T) {
	c := standalone(t).client()
	ctx := context.Background()
	cfg := testConfig()
	cfg.TTL = time.Minute // the test drives the renewal
	a, b := startManager(t, c, cfg), startManager(t, c, testConfig())

	gone, err := a.Acquire(ctx, "dead-gone")
	require.NoError(t, err)
	replaced, err := a.Acquire(ctx, "dead-replaced")
	require.NoError(t, err)
	require.NoError(t, c.Del(ctx, a.nodeKey()).Err())
	_, err = b.Acquire(ctx, "dead-gone")
	require.NoError(t, err, "Acquire of a room whose session is gone")

	require.ErrorIs(t, a.tick(ctx), errSessionLost, "a's renewal: a new epoch")
	require.NotEqual(t, replaced.epoch, a.sess.Load().epoch)
	l, err := b.Acquire(ctx, "dead-replaced")
	require.NoError(t, err, "Acquire of a room whose node has a later epoch")
	assert.Greater(t, l.Token(), replaced.Token(), "fence of the taken room")
	assert.True(t, isLost(gone) && isLost(replaced), "a's leases after its session was lost: want lost")
}

// TestLiveSessionsRoomIsNeverTaken: while its owner's session lives, a
// room is held by it; so is a route of the earlier per-room format (it has
// a TTL) whatever its node's heartbeat says, until it expires.
func TestLiveSessionsRoomIsNeverTaken(t *testing.T) {
	c := standalone(t).client()
	ctx := context.Background()
	a, b := startManager(t, c, testConfig()), startManager(t, c, testConfig())
	l, err := a.Acquire(ctx, "live")
	require.NoError(t, err)
	for range 3 { // across renewals of both sessions
		_, err = b.Acquire(ctx, "live")
		require.ErrorIs(t, err, ErrHeld, "Acquire of a live session's room")
		require.NoError(t, b.tick(ctx))
		require.NoError(t, a.tick(ctx))
	}
	require.Equal(t, l.value, c.Get(ctx, l.key).Val(), "route of the live session's room")
	require.True(t, l.held(), "a's lease")

	old := "old-node|0123456789abcdef|5" // node|holder|fence, renewed by its holder
	require.NoError(t, c.Set(ctx, b.routeKey("old-format"), old, time.Minute).Err())
	_, err = b.Acquire(ctx, "old-format")
	require.ErrorIs(t, err, ErrHeld, "Acquire of a room held in the earlier format")
	require.Equal(t, old, c.Get(ctx, b.routeKey("old-format")).Val(), "route of the earlier format")
}

// TestRestartWaitsForItsOldSession: a process with the node id of one that
// crashed waits, at Start, for the crashed one's session to expire: its
// rooms are not free before.
func TestRestartWaitsForItsOldSession(t *testing.T) {
	c := standalone(t).client()
	ctx := context.Background()
	cfg := testConfig()
	cfg.TTL = 2 * time.Second
	crashed, err := New(c, cfg)
	require.NoError(t, err)
	require.NoError(t, crashed.Start(ctx))
	_, err = crashed.Acquire(ctx, "crashed")
	require.NoError(t, err)
	require.NoError(t, crashed.stopRenewer(ctx)) // it stops renewing, as if killed
	epoch := strconv.FormatInt(crashed.sess.Load().epoch, 10)

	next, err := New(c, cfg)
	require.NoError(t, err)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, next.Start(sctx), "Start while the crashed process's session lives")
	t.Cleanup(func() { _ = next.Stop(context.Background()) })
	assert.NotEqual(t, epoch, c.HGet(ctx, next.nodeKey(), "epoch").Val(), "session after the restart")
	_, err = next.Acquire(ctx, "crashed")
	require.NoError(t, err, "Acquire of the crashed process's room")

	// A start cut short while another process's session lives says so.
	other, err := New(c, cfg)
	require.NoError(t, err)
	sctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = other.Start(sctx)
	require.ErrorIs(t, err, errSessionBusy, "Start while another process's session lives")
	assert.ErrorContains(t, err, cfg.Node, "Start's error: want the node id named")
}
