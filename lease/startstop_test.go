package lease

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Stop that comes as Start ends (a signal during the app's start) stops
// the renewer Start started: Start hands the renewer its own channels,
// not fields a Stop clears meanwhile (the renewer then got nil channels:
// it never stopped, and Stop waited forever, or it closed a nil channel
// and crashed the process). The race detector reports the read of the
// cleared fields whenever the Stop lands in that window.
func TestStopAsStartEndsStopsTheRenewer(t *testing.T) {
	b := standalone(t)
	m, err := New(b.client(), testConfig())
	require.NoError(t, err)
	started := make(chan error, 1)
	go func() { started <- m.Start(context.Background()) }()
	for { // Stop as soon as Start has marked the Manager running
		m.mu.Lock()
		running := m.running
		m.mu.Unlock()
		if running {
			break
		}
		runtime.Gosched()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	require.NoError(t, m.Stop(ctx))
	require.NoError(t, <-started)
}

// Of two Starts at once, one is refused: both used to start a session and
// a renewer, and Stop stopped only the second's (goleak finds the other).
func TestConcurrentStartsRefuseOne(t *testing.T) {
	b := standalone(t)
	m, err := New(b.client(), testConfig())
	require.NoError(t, err)
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- m.Start(context.Background()) }()
	}
	e1, e2 := <-errs, <-errs
	require.NoError(t, m.Stop(context.Background()))
	assert.True(t, (e1 == nil) != (e2 == nil), "two Starts at once returned %v and %v; want exactly one refused", e1, e2)
}

// Start after Stop (a drain during the app's start stopped the Manager
// first) returns ErrNotRunning, as Start's doc says, not "called twice".
func TestStartAfterStopIsNotRunning(t *testing.T) {
	b := standalone(t)
	m, err := New(b.client(), testConfig())
	require.NoError(t, err)
	require.NoError(t, m.Stop(context.Background()))
	assert.ErrorIs(t, m.Start(context.Background()), ErrNotRunning)
}

// When the session's end fails, Stop's error counts every room still
// held, those left to expire after HandOff too (it said 0).
func TestStopsErrorCountsEveryRoomTheSessionKeeps(t *testing.T) {
	b := standalone(t)
	c := b.client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if isScript(cmd, sessionEndScript) {
			return errors.New("ERR injected: session end refused")
		}
		return next(ctx, cmd)
	}})
	m := startManager(t, c, testConfig())
	_, err := m.HandOff(func(context.Context, *Lease) error { return nil }, 1)
	require.NoError(t, err)
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		_, err := m.Acquire(ctx, id)
		require.NoError(t, err)
	}
	err = m.Stop(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "3 rooms stay held until the session expires")
}

// A dead node's route is taken over; that reply is lost, and so is the
// reply of the take-over of its own route that the retry found. Acquire
// then said the room was held by this very node (a caller forwarding per
// the docs forwarded to itself) and left a route nobody holds. It now
// fails saying the replies were lost, and deletes that route.
func TestLostTakeOverRepliesLeaveNoRouteAndNameNoHolder(t *testing.T) {
	b := standalone(t)
	raw := b.client()
	var lose atomic.Int32
	lose.Store(2)
	c := b.client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		err := next(ctx, cmd)
		if err == nil && isScript(cmd, acquireScript) {
			if res, _ := cmd.(*redis.Cmd).Slice(); len(res) == 2 && res[0] != int64(0) && lose.Add(-1) >= 0 {
				return fmt.Errorf("reply lost: %w", context.DeadlineExceeded) // applied: it took the room
			}
		}
		return err
	}})
	cfg := testConfig()
	cfg.TTL = time.Minute
	m := startManager(t, c, cfg)
	ctx := context.Background()
	require.NoError(t, raw.Set(ctx, m.routeKey("r"), "gone-node|123|5", 0).Err())

	_, err := m.Acquire(ctx, "r")
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrHeld)
	assert.Contains(t, err.Error(), "the replies of its attempts were lost")
	assert.Equal(t, redis.Nil, raw.Get(ctx, m.routeKey("r")).Err(), "the route the lost take-overs left")
	l, err := m.Acquire(ctx, "r")
	require.NoError(t, err, "the next Acquire")
	require.NoError(t, l.Release(ctx))
}

// A take-over of this session's own route (a reply was lost) cut short by
// the flip deletes that route once, not once per layer that saw it fail.
func TestOwnTakeOverCutShortIsCleanedUpOnce(t *testing.T) {
	b := standalone(t)
	var calls, cleanUps atomic.Int32
	var m *Manager
	c := b.client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if isReleaseHolder(cmd) {
			cleanUps.Add(1)
		}
		if !isScript(cmd, acquireScript) {
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		switch calls.Add(1) {
		case 1: // applied, reply lost
			return fmt.Errorf("reply lost: %w", context.DeadlineExceeded)
		case 3: // the take-over of the own route: applied, reply lost; the flip comes
			m.BeginDrain()
			return fmt.Errorf("reply lost: %w", context.DeadlineExceeded)
		}
		return err
	}})
	cfg := testConfig()
	cfg.TTL = time.Minute
	m = startManager(t, c, cfg)
	_, err := m.Acquire(context.Background(), "twice")
	require.ErrorIs(t, err, ErrDraining)
	assert.EqualValues(t, 1, cleanUps.Load(), "session-wide route deletions sent")
}
