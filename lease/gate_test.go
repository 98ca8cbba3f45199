package lease

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/drain"
)

// BeginDrain closes the gate and marks the session draining at once, not
// at the next renewal round: routers stop placing rooms here at the flip,
// even when no Acquire comes to notice it.
func TestBeginDrainClosesTheGateAndMarksTheSession(t *testing.T) {
	b := standalone(t)
	c := b.client()
	cfg := testConfig()
	cfg.TTL = time.Minute // the renewer's tick never comes in this test
	m := startManager(t, c, cfg)
	ctx := context.Background()
	_, err := m.Acquire(ctx, "before")
	require.NoError(t, err, "Acquire before the flip")
	m.BeginDrain()
	waitFor(t, "session marked draining", func() bool {
		return c.HGet(ctx, m.nodeKey(), "state").Val() == stateDraining
	})
	_, err = m.Acquire(ctx, "after")
	require.ErrorIs(t, err, ErrDraining, "Acquire after the flip")
}

// During the propagation delay the node still serves its rooms: Acquire of
// a room it holds returns the lease after the flip. A room not held gets
// ErrDraining, and so does a held one once the hand-off took it.
func TestAcquireOfAHeldRoomAfterTheFlipReturnsItsLease(t *testing.T) {
	b := standalone(t)
	c := b.client()
	m := startManager(t, c, testConfig())
	ctx := context.Background()
	held, err := m.Acquire(ctx, "held")
	require.NoError(t, err, "Acquire before the flip")
	m.BeginDrain()
	got, err := m.Acquire(ctx, "held")
	require.NoError(t, err, "Acquire of a held room after the flip")
	assert.Same(t, held, got, "Acquire of a held room after the flip: want the lease held")
	_, err = m.Acquire(ctx, "new")
	assert.ErrorIs(t, err, ErrDraining, "Acquire of a room not held after the flip")

	var during error
	handOff, err := m.HandOff(func(ctx context.Context, l *Lease) error {
		_, during = m.Acquire(ctx, l.ID())
		return nil
	}, 1)
	require.NoError(t, err, "HandOff")
	require.NoError(t, handOff.Run(ctx), "hand-off")
	assert.ErrorIs(t, during, ErrDraining, "Acquire of a room the hand-off has")
	_, err = m.Acquire(ctx, "held")
	assert.ErrorIs(t, err, ErrDraining, "Acquire of the room the hand-off released")
}

// The hand-off hook closes the gate itself: a Manager whose BeginDrain
// was not called hands no room over to a lease acquired during its hand-off.
func TestHandOffClosesTheGate(t *testing.T) {
	b := standalone(t)
	c := b.client()
	cfg := testConfig()
	m := startManager(t, c, cfg)
	ctx := context.Background()
	_, err := m.Acquire(ctx, "before")
	require.NoError(t, err, "Acquire before the drain")
	handOff, err := m.HandOff(func(context.Context, *Lease) error { return nil }, 1)
	require.NoError(t, err, "HandOff")
	require.NoError(t, handOff.Run(ctx), "hand-off")
	_, err = m.Acquire(ctx, "during")
	require.ErrorIs(t, err, ErrDraining, "Acquire after the hand-off began")
}

// A hand-off cut off by its budget before reaching every room must not let
// the Release hook release the rooms it never flushed (invariant 6).
func TestAbandonedHandOffReleasesNothingUnflushed(t *testing.T) {
	b := standalone(t)
	c := b.client()
	cfg := testConfig()
	m := startManager(t, c, cfg)
	ctx := context.Background()
	rooms := []string{"room-0", "room-1", "room-2", "room-3"}
	for _, id := range rooms {
		_, err := m.Acquire(ctx, id)
		require.NoError(t, err)
	}
	release := make(chan struct{})
	defer close(release)
	hang := func(ctx context.Context, l *Lease) error {
		<-release // a flush that ignores its context
		return nil
	}
	handOff, err := m.HandOff(hang, 1)
	require.NoError(t, err)
	handOff.Timeout = 100 * time.Millisecond
	m.BeginDrain()
	rep := drain.Run(ctx, "test", []drain.Hook{handOff, m.ReleaseHook()})
	h, _ := rep.Hook(handOff.Name)
	require.Equal(t, drain.TimedOut, h.Outcome, "hand-off outcome")
	for _, id := range rooms {
		n, err := c.Exists(ctx, m.routeKey(id)).Result()
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "%s: route; want the unflushed room's route left, not released (it moves with the session)", id)
	}
	assert.Empty(t, m.snapshot(), "leases the manager still holds after the Release hook")
}

// Once HandOff was called, a lease the hand-off never took (its hook did not
// run) ends unflushed (ErrLeftToExpire) at the Release hook, not released.
func TestReleaseHookLeavesUnflushedWithHandOff(t *testing.T) {
	b := standalone(t)
	c := b.client()
	cfg := testConfig()
	m := startManager(t, c, cfg)
	ctx := context.Background()
	_, err := m.HandOff(func(context.Context, *Lease) error { return nil }, 1)
	require.NoError(t, err)
	l, err := m.Acquire(ctx, "room-x")
	require.NoError(t, err)
	m.BeginDrain() // the hand-off's hook never runs
	require.NoError(t, m.ReleaseHook().Run(ctx))
	assert.ErrorIs(t, context.Cause(l.Context()), ErrLeftToExpire, "cause of the unflushed lease")
}

// A lease whose session renewals have not been confirmed for TTL·2/3 is
// not reported held, even before the renewer (starved, say) has ended it.
func TestHeldDistrustsAnOverdueLease(t *testing.T) {
	b := standalone(t)
	m := startManager(t, b.client(), testConfig())
	l, err := m.Acquire(context.Background(), "room-h")
	require.NoError(t, err)
	require.True(t, l.held(), "fresh lease: Held()")
	_, err = m.stopRenewer(context.Background()) // a renewer that stopped getting CPU
	require.NoError(t, err)
	m.okAt.Store(new(time.Now().Add(-m.lostAfter))) // its last confirmed renewal, TTL·2/3 ago
	assert.False(t, l.held(), "overdue lease: Held()")
}

// TestNoAcquireScriptAfterTheFlip: an attempt that failed before the flip
// is not retried after it (invariant 2: no lease is acquired after the
// flip, not even one released right after).
func TestNoAcquireScriptAfterTheFlip(t *testing.T) {
	b := standalone(t)
	var (
		mgr       atomic.Pointer[Manager]
		attempts  atomic.Int32
		afterFlip atomic.Int32
	)
	hook := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if !isAcquire(cmd) {
			return next(ctx, cmd)
		}
		if mgr.Load().draining() {
			afterFlip.Add(1)
		}
		if attempts.Add(1) == 1 {
			mgr.Load().BeginDrain() // the flip comes while the first attempt is lost
			return context.DeadlineExceeded
		}
		return next(ctx, cmd)
	}}
	c := b.client(hook)
	cfg := testConfig()
	cfg.TTL = 6 * time.Second
	m := startManager(t, c, cfg)
	mgr.Store(m)
	_, err := m.Acquire(context.Background(), "flip")
	assert.ErrorIs(t, err, ErrDraining, "Acquire across the flip")
	assert.Zero(t, afterFlip.Load(), "acquire scripts sent after the flip")
	assert.Zero(t, c.Exists(context.Background(), m.routeKey("flip")).Val(), "key exists after the flip; want none")
	assert.Empty(t, m.snapshot(), "leases held after the flip")
}

// HandOff refuses a nil fn when the hook is built, before anything drains.
func TestHandOffRefusesANilFn(t *testing.T) {
	b := standalone(t)
	m := startManager(t, b.client(), testConfig())
	_, err := m.HandOff(nil, 1)
	require.ErrorContains(t, err, "fn is nil", "HandOff(nil)")
}

// After the flip, Acquire of a room another node holds answers as before
// the flip, an error matching ErrHeld that names the holder, so the caller
// forwards it; only a room nobody holds answers ErrDraining. Neither sends
// an acquire script.
func TestAcquireAfterTheFlipNamesAnotherNodesHolder(t *testing.T) {
	b := standalone(t)
	ctx := context.Background()
	other := startManager(t, b.client(), testConfig())
	_, err := other.Acquire(ctx, "theirs")
	require.NoError(t, err)
	var scripts atomic.Int32
	c := b.client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if isAcquire(cmd) {
			scripts.Add(1)
		}
		return next(ctx, cmd)
	}})
	m := startManager(t, c, testConfig())
	m.BeginDrain()

	_, err = m.Acquire(ctx, "theirs")
	require.ErrorIs(t, err, ErrHeld, "a room another node holds")
	assert.NotErrorIs(t, err, ErrDraining)
	assert.ErrorContains(t, err, `by node "`+other.cfg.Node+`"`)
	_, err = m.Acquire(ctx, "nobodys")
	assert.ErrorIs(t, err, ErrDraining, "a room nobody holds")
	assert.NotErrorIs(t, err, ErrHeld)
	assert.Zero(t, scripts.Load(), "acquire scripts sent after the flip")
	assert.Zero(t, c.Exists(ctx, m.routeKey("nobodys")).Val(), "a route after the flip")
}

// An acquisition the flip cuts short (its first attempt's reply lost as
// the gate closes) answers like one the gate refused: the holder, matching
// ErrHeld, for a room another node holds.
func TestAcquireCutShortByTheFlipNamesAnotherNodesHolder(t *testing.T) {
	b := standalone(t)
	ctx := context.Background()
	other := startManager(t, b.client(), testConfig())
	_, err := other.Acquire(ctx, "theirs")
	require.NoError(t, err)
	var mgr atomic.Pointer[Manager]
	var attempts atomic.Int32
	c := b.client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if isAcquire(cmd) && attempts.Add(1) == 1 {
			mgr.Load().BeginDrain() // the flip comes while the first attempt's reply is lost
			return context.DeadlineExceeded
		}
		return next(ctx, cmd)
	}})
	cfg := testConfig()
	cfg.TTL = 6 * time.Second
	m := startManager(t, c, cfg)
	mgr.Store(m)
	_, err = m.Acquire(ctx, "theirs")
	require.ErrorIs(t, err, ErrHeld)
	assert.ErrorContains(t, err, `by node "`+other.cfg.Node+`"`)
	assert.Equal(t, int32(1), attempts.Load(), "acquire scripts sent")
}
