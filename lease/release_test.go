package lease

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReleaseOfAnEndedRoute: a route that is gone is released: the room is
// free (go-redis's own resend of a release whose reply was lost finds just
// that); a lease whose session was lost sends nothing (its route is dead
// with the session) and reports ErrNotHeld.
func TestReleaseOfAnEndedRoute(t *testing.T) {
	var releases atomic.Int32
	c := standalone(t).client(pipelineHook{fn: func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		for _, cmd := range cmds {
			if isScript(cmd, releaseScript) {
				releases.Add(1)
			}
		}
		return next(ctx, cmds)
	}})
	cfg := testConfig()
	cfg.TTL = time.Minute // the renewer does not tick during the test
	m := startManager(t, c, cfg)
	ctx := context.Background()

	l, err := m.Acquire(ctx, "gone")
	require.NoError(t, err, "Acquire")
	require.NoError(t, c.Del(ctx, l.key).Err())
	assert.NoError(t, l.Release(ctx), "Release of a deleted route")

	l, err = m.Acquire(ctx, "session-lost")
	require.NoError(t, err, "Acquire")
	m.loseSession(l.epoch, lostError("test"))
	before := releases.Load()
	err = l.Release(ctx)
	assert.ErrorIs(t, err, ErrNotHeld, "Release after the session was lost")
	assert.ErrorContains(t, err, "session ended", "Release after the session was lost")
	assert.Equal(t, before, releases.Load(), "release scripts sent after the session was lost")
}

// TestReleaseWhoseSessionEndsMeanwhile: a Release whose session ends
// between its attempts reports ErrNotHeld, as one that found it ended
// first does: the room is free with the session, and a drain must not
// fail on it.
func TestReleaseWhoseSessionEndsMeanwhile(t *testing.T) {
	var started atomic.Pointer[Manager]
	c := standalone(t).client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if m := started.Load(); m != nil && isScript(cmd, releaseScript) {
			if s := m.sess.Load(); s != nil {
				m.loseSession(s.epoch, lostError("test"))
			}
			return syscall.ECONNRESET // the reply was lost: the release retries
		}
		return next(ctx, cmd)
	}})
	cfg := testConfig()
	cfg.TTL = time.Minute // the renewer does not tick during the test
	cfg.CallTimeout = 100 * time.Millisecond
	m := startManager(t, c, cfg)
	started.Store(m)
	ctx := context.Background()

	l, err := m.Acquire(ctx, "meanwhile")
	require.NoError(t, err, "Acquire")
	err = l.Release(ctx)
	assert.ErrorIs(t, err, ErrNotHeld, "Release whose session ended between its attempts")
	assert.ErrorContains(t, err, "session ended")
}

// TestAcquireWhoseSessionIsLostMeanwhile: an acquisition whose session is
// lost while its script runs, and again under the next session, fails
// with ErrLost; its clean-up, cut short by the session's end, adds no
// ErrNotHeld: the route died with the session, and Acquire's errors never
// mean "released".
func TestAcquireWhoseSessionIsLostMeanwhile(t *testing.T) {
	var started atomic.Pointer[Manager]
	c := standalone(t).client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		m := started.Load()
		switch {
		case m == nil:
		case isScript(cmd, acquireScript):
			err := next(ctx, cmd)
			if s := m.sess.Load(); s != nil {
				m.loseSession(s.epoch, lostError("test"))
			}
			return err
		case isScript(cmd, releaseScript):
			return syscall.ECONNRESET // the clean-up's reply is lost: it retries and finds the session ended
		}
		return next(ctx, cmd)
	}})
	cfg := testConfig()
	cfg.CallTimeout = 100 * time.Millisecond
	m := startManager(t, c, cfg)
	started.Store(m)

	_, err := m.Acquire(context.Background(), "lost-meanwhile")
	assert.ErrorIs(t, err, ErrLost, "Acquire whose session was lost meanwhile, twice")
	assert.NotErrorIs(t, err, ErrNotHeld, "Acquire whose session was lost meanwhile, twice")
}

// An acquisition whose session is lost while its script runs goes on
// under the next session, as its caller would have to: a session's loss
// (a failover of the primary that holds it) is latency to the caller, not
// an error.
func TestAcquireWhoseSessionIsLostMeanwhileTakesTheRoomUnderTheNext(t *testing.T) {
	var started atomic.Pointer[Manager]
	var lost atomic.Bool
	c := standalone(t).client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		m := started.Load()
		if m == nil || !isScript(cmd, acquireScript) {
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		if s := m.sess.Load(); s != nil && lost.CompareAndSwap(false, true) {
			m.loseSession(s.epoch, lostError("test"))
		}
		return err
	}})
	m := startManager(t, c, testConfig())
	started.Store(m)
	first := m.lastEpoch.Load()

	l, err := m.Acquire(context.Background(), "lost-once")
	require.NoError(t, err, "Acquire whose session was lost meanwhile, once")
	assert.NotEqual(t, first, l.epoch, "the lease's session")
	assert.Equal(t, m.sess.Load().epoch, l.epoch, "the lease's session: the current one")
	require.NoError(t, l.Release(context.Background()))
}

// A caller whose ctx ends while an acquisition whose session was lost
// cleans up (a release held up by a failover) leaves at its ctx: the
// acquisition is not decided while it may still go on under the next
// session, which it used to do with every caller held until it ended.
func TestACallerLeavesAnAcquisitionWhoseSessionWasLostAtItsCtx(t *testing.T) {
	var started atomic.Pointer[Manager]
	var lost atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	c := standalone(t).client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		m := started.Load()
		switch {
		case m == nil:
		case isScript(cmd, acquireScript):
			err := next(ctx, cmd)
			if s := m.sess.Load(); s != nil && lost.CompareAndSwap(false, true) {
				m.loseSession(s.epoch, lostError("test"))
			}
			return err
		case isScript(cmd, releaseScript) && lost.Load():
			select {
			case <-held:
			default:
				close(held)
			}
			<-release // the clean-up is held up
		}
		return next(ctx, cmd)
	}})
	cfg := testConfig()
	cfg.TTL = 12 * time.Second // calls outlast the hold
	m := startManager(t, c, cfg)
	started.Store(m)
	defer close(release)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := m.Acquire(ctx, "window"); done <- err }()
	<-held
	cancel()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire still waits after its ctx ended, the clean-up held")
	}
}

// TestReleaseRacingItsOwnReacquireIsReleased: a lease leaves the set
// before its route's compare-and-DEL is sent, and a request for the room
// in between takes the route over on this very node (a route of its own
// session that no lease has is nobody's). The release then finds a later
// value of its session: its own value is gone, the room is this node's,
// and the release succeeded, counted as one; "taken by another holder"
// before, with no other holder.
func TestReleaseRacingItsOwnReacquireIsReleased(t *testing.T) {
	b := standalone(t)
	var m *Manager
	var armed atomic.Bool
	var again *Lease
	var againErr error
	hook := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if isScript(cmd, releaseScript) && armed.CompareAndSwap(true, false) {
			again, againErr = m.Acquire(context.Background(), "r") // between the lease's end and its route's delete
		}
		return next(ctx, cmd)
	}}
	m = startManager(t, b.client(hook), testConfig())
	l, err := m.Acquire(context.Background(), "r")
	require.NoError(t, err)
	armed.Store(true)
	rerr := l.Release(context.Background())
	require.NoError(t, againErr, "Acquire during the release")
	require.NotSame(t, l, again)
	assert.NoError(t, rerr, "Release of a lease whose room this node took again")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.met.released), "released")
	o, err := m.Owner(context.Background(), "r")
	require.NoError(t, err)
	assert.Equal(t, again.Token(), o.Fence, "the room's holder: the later lease")
}
