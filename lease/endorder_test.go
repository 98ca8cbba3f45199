package lease

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Losing a session cancels every lease's context before any hook runs: a
// hook that takes its time (an audit log) must not keep the next lease
// live past the session's expiry, when its room may be someone else's.
// Stop, which ends the session right after, does the same.
func TestEveryContextIsCancelledBeforeAnyHook(t *testing.T) {
	for _, how := range []string{"session lost", "Stop"} {
		t.Run(how, func(t *testing.T) {
			b := standalone(t)
			c := b.client()
			var (
				mu     sync.Mutex
				leases []*Lease
				live   []int // per hook call: leases whose context was still live
			)
			cfg := testConfig()
			cfg.OnEnd = func(*Lease, error) {
				mu.Lock()
				defer mu.Unlock()
				n := 0
				for _, l := range leases {
					if l.Context().Err() == nil {
						n++
					}
				}
				live = append(live, n)
			}
			m := startManager(t, c, cfg)
			for _, id := range []string{"a", "b", "c"} {
				l, err := m.Acquire(context.Background(), id)
				require.NoError(t, err)
				mu.Lock()
				leases = append(leases, l)
				mu.Unlock()
			}
			if how == "Stop" {
				require.NoError(t, m.Stop(context.Background()))
			} else {
				require.NoError(t, c.Del(context.Background(), m.nodeKey()).Err()) // the session ended in Redis
				waitFor(t, "every lease's hooks ran", func() bool { mu.Lock(); defer mu.Unlock(); return len(live) == 3 })
			}
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, []int{0, 0, 0}, live, "leases still live at each hook call")
		})
	}
}

// An acquisition that finds the room's route naming a dead session reads
// that session; a flip meanwhile ends it before the second script: no
// script is sent after the flip.
func TestNoAcquireScriptAfterAFlipDuringTheDeadSessionRead(t *testing.T) {
	b := standalone(t)
	var mgr atomic.Pointer[Manager]
	var afterFlip atomic.Int32
	c := b.client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if m := mgr.Load(); m != nil {
			if isAcquire(cmd) && m.draining() {
				afterFlip.Add(1)
			}
			if cmd.Name() == "hmget" {
				m.BeginDrain() // the flip comes while the dead session is read
			}
		}
		return next(ctx, cmd)
	}})
	m := startManager(t, c, testConfig())
	mgr.Store(m)
	require.NoError(t, c.Set(context.Background(), m.routeKey("dead"), "gone-node|123|5", 0).Err())
	_, err := m.Acquire(context.Background(), "dead")
	assert.ErrorIs(t, err, ErrDraining)
	assert.Zero(t, afterFlip.Load(), "acquire scripts sent after the flip")
	assert.Equal(t, "gone-node|123|5", c.Get(context.Background(), m.routeKey("dead")).Val(), "the dead route, untouched")
}

// A release whose attempt deleted the route but whose reply was lost finds
// the route gone on its next attempt: that is its own delete, so Release
// returns nil and counts it.
func TestReleaseWhoseReplyWasLost(t *testing.T) {
	b := standalone(t)
	var drop atomic.Bool
	c := b.client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		err := next(ctx, cmd)
		if isScript(cmd, releaseScript) && drop.CompareAndSwap(true, false) {
			return context.DeadlineExceeded // applied, reply lost
		}
		return err
	}})
	m := startManager(t, c, testConfig())
	l, err := m.Acquire(context.Background(), "r")
	require.NoError(t, err)
	drop.Store(true)
	require.NoError(t, l.Release(context.Background()), "Release of a route its own attempt deleted")
	assert.False(t, drop.Load(), "the reply was dropped")
	assert.Zero(t, c.Exists(context.Background(), l.key).Val())
	assert.Equal(t, 1.0, testutil.ToFloat64(m.met.released))
}

// A flushed lease that another goroutine ended before the hand-off's
// releaser got to it (Stop, once a forced drain abandoned the hook, left
// it to expire) is not released: it is reported as its end says and
// counted once, by whoever ended it.
func TestAFlushedLeaseEndedMeanwhileIsNotReleased(t *testing.T) {
	b := standalone(t)
	c := b.client()
	m := startManager(t, c, testConfig())
	l, err := m.Acquire(context.Background(), "f")
	require.NoError(t, err)
	require.True(t, l.state.CompareAndSwap(stateHeld, stateHandingOff), "the hand-off takes it")
	m.leaveToExpire(l) // as Stop does
	flushed := make(chan *Lease, 1)
	flushed <- l
	close(flushed)
	var got []error
	m.releaseFlushed(context.Background(), flushed, func(_ *Lease, err error) { got = append(got, err) })
	require.Len(t, got, 1)
	assert.ErrorIs(t, got[0], ErrLeftToExpire)
	assert.Equal(t, 1, int(c.Exists(context.Background(), l.key).Val()), "its route stays until the session ends")
	assert.Zero(t, testutil.ToFloat64(m.met.released), "released")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.met.leftToExpire), "left to expire")
}

// A Stop that comes while Start is starting the session (once its check
// that the Manager is not stopped has passed) ends that session, and
// Start then fails rather than start a renewer nobody stops.
func TestStopDuringStartLeavesNoRenewer(t *testing.T) {
	b := standalone(t)
	var mgr atomic.Pointer[Manager]
	stopped := make(chan error, 1)
	c := b.client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		err := next(ctx, cmd)
		if m := mgr.Load(); m != nil && isScript(cmd, sessionScript) && mgr.CompareAndSwap(m, nil) {
			go func() { stopped <- m.Stop(context.Background()) }()
			waitFor(t, "Stop under way", func() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.stopped })
		}
		return err
	}})
	m, err := New(c, testConfig())
	require.NoError(t, err)
	mgr.Store(m)
	assert.ErrorIs(t, m.Start(context.Background()), ErrNotRunning)
	require.NoError(t, <-stopped)
	m.mu.Lock()
	defer m.mu.Unlock()
	assert.False(t, m.running, "running")
	assert.Nil(t, m.done, "a renewer was started")
	assert.Zero(t, c.Exists(context.Background(), m.nodeKey()).Val(), "the session Start started is ended")
}

// A flushed lease found not held because its session is overdue (no
// renewal confirmed in time, not yet lost by the renewer) is ended as
// lost there, as Acquire's attach does: its holder is told, and Stop does
// not later leave it to expire as well.
func TestHandOffEndsALeaseWhoseSessionIsOverdue(t *testing.T) {
	m := unstartedManager(t)
	m.makeCurrent(7, time.Now())
	l := m.newLease("room", 5, m.sess.Load())
	require.True(t, l.state.CompareAndSwap(stateHeld, stateHandingOff))
	m.now = func() time.Time { return time.Now().Add(m.cfg.TTL) } // past the deadline
	err := m.flushOne(context.Background(), l, func(context.Context, *Lease) error { return nil })
	assert.ErrorIs(t, err, ErrLost)
	assert.ErrorIs(t, context.Cause(l.Context()), ErrLost, "the lease's context")
	assert.Equal(t, stateHandedOff, l.state.Load())
	assert.Equal(t, 1.0, testutil.ToFloat64(m.met.lost))
}

// An OnLost that breaks the rule and Acquires another room of the lost
// session fails, after at most a TTL waiting for the next session, and
// the loss goes on: it does not wait for that room's hooks, which come
// after its own.
func TestAnAcquireFromAHookDuringALossFails(t *testing.T) {
	b := standalone(t)
	c := b.client()
	var m *Manager
	acquired := make(chan error, 2)
	cfg := testConfig()
	cfg.OnLost = func(l *Lease, _ error) { // each room's hook Acquires the other: whichever runs first
		_, err := m.Acquire(context.Background(), map[string]string{"a": "b", "b": "a"}[l.ID()])
		acquired <- err
	}
	m = startManager(t, c, cfg)
	for _, id := range []string{"a", "b"} {
		_, err := m.Acquire(context.Background(), id)
		require.NoError(t, err)
	}
	require.NoError(t, c.Del(context.Background(), m.nodeKey()).Err()) // the session ended in Redis
	// A bound on a hang, not a wait for a condition.
	hang := time.After(10 * m.cfg.TTL)
	for range 2 {
		select {
		case err := <-acquired:
			assert.Error(t, err, "an Acquire from OnLost during the loss")
		case <-hang:
			t.Fatal("an Acquire from OnLost during the loss still waits after 10 TTLs")
		}
	}
	waitFor(t, "a new session", func() bool { return m.sess.Load() != nil })
}
