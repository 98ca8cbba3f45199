package lease

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestADelayedAcquireAttemptLeavesTheLeaseItsRoute: an acquire attempt
// held up on the network past its CallTimeout is retried; the retry takes
// the room and the lease is handed out. When the first attempt then
// reaches Redis, it must not take the route over with a new fence: writes
// fenced against the route would be refused to the lease's holder, and its
// Release would find the room "taken by another holder".
func TestADelayedAcquireAttemptLeavesTheLeaseItsRoute(t *testing.T) {
	b := standalone(t)
	raw := b.client()
	var held atomic.Bool
	delayed := make(chan func(), 1)
	c := b.client(holdUpAcquires(raw, delayed, func(string) bool { return held.CompareAndSwap(false, true) }))
	cfg := testConfig()
	cfg.TTL = time.Minute
	m := startManager(t, c, cfg)
	ctx := context.Background()
	l, err := m.Acquire(ctx, "late-attempt")
	require.NoError(t, err)
	(<-delayed)() // the first attempt reaches Redis now

	assert.Equal(t, l.value, raw.Get(ctx, l.key).Val(), "route of a held lease; want the lease's value")
	assert.NoError(t, l.Release(ctx), "Release of a held lease")
}

// holdUpAcquires is a hook that holds up on the network every acquire
// attempt whose route hold accepts: the caller gets a timeout, and the
// attempt reaches Redis (through raw) when the test calls what it sent on
// delayed.
func holdUpAcquires(raw redis.UniversalClient, delayed chan<- func(), hold func(route string) bool) cmdHook {
	return cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		a := cmd.Args() // evalsha sha 2 route fence args...
		if !isScript(cmd, acquireScript) || !hold(a[3].(string)) {
			return next(ctx, cmd)
		}
		keys, args := []string{a[3].(string), a[4].(string)}, a[5:]
		delayed <- func() { _ = acquireScript.Run(context.Background(), raw, keys, args...).Err() }
		return fmt.Errorf("request held up on the network: %w", context.DeadlineExceeded)
	}}
}

// TestAnAcquireWhoseReplyWasLostTakesItsOwnRoute: an attempt that Redis
// applied but whose reply was lost left a route of this very session that
// no lease holds; the retry takes it, with a higher fence, at once.
func TestAnAcquireWhoseReplyWasLostTakesItsOwnRoute(t *testing.T) {
	b := standalone(t)
	raw := b.client()
	var armed atomic.Bool
	armed.Store(true)
	c := b.client(loseReplyOnce(&armed, func(cmd redis.Cmder) bool { return isScript(cmd, acquireScript) }))
	cfg := testConfig()
	cfg.TTL = time.Minute
	m := startManager(t, c, cfg)
	ctx := context.Background()
	l, err := m.Acquire(ctx, "lost-reply")
	require.NoError(t, err, "Acquire after a lost reply")
	require.False(t, armed.Load(), "the first attempt ran")
	assert.Equal(t, l.value, raw.Get(ctx, l.key).Val(), "route; want the lease's value")
	fence, err := raw.Get(ctx, m.fenceKey("lost-reply")).Int64()
	require.NoError(t, err)
	assert.Equal(t, l.Token(), fence, "the lease's fence is the last issued")
	require.NoError(t, l.Release(ctx), "Release")
}

// TestATakeOverWhoseReplyWasLostTakesItsOwnRoute: the second call that
// takes a dead session's route over is applied, but its reply is lost; its
// retry finds the route of this very session, no longer the dead value it
// was sent with, and takes that by its exact value in turn: the room is
// acquired, not refused as held by this node.
func TestATakeOverWhoseReplyWasLostTakesItsOwnRoute(t *testing.T) {
	b := standalone(t)
	raw := b.client()
	var armed atomic.Bool
	armed.Store(true)
	c := b.client(loseReplyOnce(&armed, func(cmd redis.Cmder) bool { // a take-over: ARGV[3], the value found, is set
		args := cmd.Args()
		return isScript(cmd, acquireScript) && len(args) > 7 && args[7] != ""
	}))
	cfg := testConfig()
	cfg.TTL = time.Minute
	m := startManager(t, c, cfg)
	ctx := context.Background()
	require.NoError(t, raw.Set(ctx, m.routeKey("dead-owner"), "gone-node|123|5", 0).Err())
	l, err := m.Acquire(ctx, "dead-owner")
	require.NoError(t, err, "Acquire of a dead session's room, the take-over's reply lost")
	require.False(t, armed.Load(), "the take-over ran")
	assert.Equal(t, l.value, raw.Get(ctx, l.key).Val(), "route; want the lease's value")
	require.NoError(t, l.Release(ctx), "Release")
}

// TestATakeOverOfItsOwnRouteCutShortLeavesNoRoute: an attempt whose reply
// was lost left a route of this session; the flip comes before the retry
// takes it over. That route is nobody's and would keep the room, refused by
// this draining node, until the session ends: it is deleted.
func TestATakeOverOfItsOwnRouteCutShortLeavesNoRoute(t *testing.T) {
	b := standalone(t)
	raw := b.client()
	var calls atomic.Int32
	var m *Manager
	c := b.client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if !isScript(cmd, acquireScript) {
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		switch calls.Add(1) {
		case 1: // applied, its reply lost
			return fmt.Errorf("reply lost: %w", context.DeadlineExceeded)
		case 2: // the retry finds the route of this session; the flip comes now
			m.BeginDrain()
		}
		return err
	}})
	cfg := testConfig()
	cfg.TTL = time.Minute
	m = startManager(t, c, cfg)
	ctx := context.Background()
	_, err := m.Acquire(ctx, "cut-short")
	require.ErrorIs(t, err, ErrDraining, "Acquire cut short by the flip")
	assert.EqualValues(t, 2, calls.Load(), "acquire scripts sent; want no take-over after the flip")
	assert.Zero(t, raw.Exists(ctx, m.routeKey("cut-short")).Val(), "the route nobody holds, after the Acquire")
}

// TestARouteOfADelayedAttemptIsFreedOnceDraining: an acquisition gave up
// (its ctx ended) while its attempt was held up on the network; the
// attempt then reached Redis and wrote a route under this node's session
// that no lease has. Before the flip the room's next Acquire adopts it;
// once draining nothing does, and Place sent the room's requests to this
// node, which forwarded them on to itself, until its session ended. A
// draining Acquire now frees such a route, and Place names an active node.
func TestARouteOfADelayedAttemptIsFreedOnceDraining(t *testing.T) {
	b := standalone(t)
	raw := b.client()
	delayed := make(chan func(), 100)
	c := b.client(holdUpAcquires(raw, delayed, func(route string) bool { return route == DefaultRoutePrefix+"{stranded}" }))
	cfg := minuteConfig()
	cfg.CallTimeout = 100 * time.Millisecond // the flight, left by its caller, gives up within a few
	m, other := startManager(t, c, cfg), startManager(t, raw, minuteConfig())
	ctx := context.Background()
	actx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := m.Acquire(actx, "stranded")
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "Acquire whose attempts are held up")
	require.NoError(t, m.waitFlights(ctx), "the acquisition's end, clean-up included")
	(<-delayed)() // reaches Redis after the clean-up
	o, err := other.Owner(ctx, "stranded")
	require.NoError(t, err)
	require.Equal(t, m.cfg.Node, o.Node, "the route the late attempt wrote")

	m.BeginDrain()
	require.NoError(t, m.tick(ctx), "renewal marking the session draining")
	_, err = m.Acquire(ctx, "stranded")
	require.ErrorIs(t, err, ErrDraining, "Acquire once draining")
	_, err = other.Owner(ctx, "stranded")
	require.ErrorIs(t, err, ErrNotHeld, "the stranded route once the draining node was asked for its room")
	o, err = m.Place(ctx, "stranded")
	require.NoError(t, err)
	assert.Equal(t, other.cfg.Node, o.Node, "Place of the room")
}

// TestARoomLeftToExpireIsNotFreedByADrainingAcquire: a route this node
// left unflushed (its hand-off failed) is no stranded one: it stays until
// the session ends (invariant 6), whoever asks for the room meanwhile.
func TestARoomLeftToExpireIsNotFreedByADrainingAcquire(t *testing.T) {
	c := standalone(t).client()
	m := startManager(t, c, minuteConfig())
	ctx := context.Background()
	hook, err := m.HandOff(func(context.Context, *Lease) error { return errors.New("snapshot store down") }, 1)
	require.NoError(t, err)
	l, err := m.Acquire(ctx, "unflushed")
	require.NoError(t, err)
	require.Error(t, hook.Run(ctx), "hand-off whose flush failed")
	require.ErrorIs(t, context.Cause(l.Context()), ErrLeftToExpire)

	_, err = m.Acquire(ctx, "unflushed")
	require.ErrorIs(t, err, ErrDraining, "Acquire once draining")
	o, err := m.Owner(ctx, "unflushed")
	require.NoError(t, err, "Owner of the room left to expire")
	assert.Equal(t, l.Token(), o.Fence, "its holder's fence")
}

// TestADrainingAcquireFreeingAStrandedRouteKeepsToItsCtx: the release of a
// stranded route is bounded by the Acquire's ctx like the rest of it; it
// used to retry for a TTL (a minute here) whatever the caller's ctx, and
// then ended with its own deadline, not the caller's cancellation.
func TestADrainingAcquireFreeingAStrandedRouteKeepsToItsCtx(t *testing.T) {
	b := standalone(t)
	raw := b.client()
	var cancelAtRelease atomic.Pointer[context.CancelFunc]
	c := b.client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if cancel := cancelAtRelease.Load(); cancel != nil && isScript(cmd, releaseScript) {
			(*cancel)() // the caller leaves while the release fails
			return fmt.Errorf("slow server: %w", context.DeadlineExceeded)
		}
		return next(ctx, cmd)
	}})
	m := startManager(t, c, minuteConfig())
	ctx := context.Background()
	require.NoError(t, raw.Set(ctx, m.routeKey("stranded"), m.sess.Load().prefix+"123", 0).Err(), "a stranded route")
	m.BeginDrain()
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	cancelAtRelease.Store(&cancel)
	_, err := m.Acquire(actx, "stranded")
	require.ErrorIs(t, err, ErrDraining)
	require.ErrorIs(t, err, context.Canceled, "Acquire's error: want its caller's cancellation")
}
