package lease

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// endingLease is a lease the renewer found its session gone and is ending: its OnLost
// blocks until the test calls proceed, so the holder has not stopped yet.
type endingLease struct {
	m    *Manager
	old  *Lease
	room string
	// early is set if the acquire script ran for room before the old
	// lease's OnLost and OnEnd returned: the room was taken with a new
	// fence while the old holder had not stopped.
	early   *atomic.Bool
	stopped *atomic.Bool // OnEnd of the old lease returned
	proceed func()       // lets OnLost return
}

// waiting reports whether an Acquire waits for a room to settle: here,
// for the ended lease to leave the set.
func (e *endingLease) waiting() bool {
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	return e.m.settled != nil
}

// startEnding acquires room, deletes the session and returns once the
// renewer, having found the session gone, is inside the lease's OnLost.
func startEnding(t *testing.T, room string) *endingLease {
	t.Helper()
	var (
		old            atomic.Pointer[Lease]
		early, stopped atomic.Bool
		entered        = make(chan struct{})
		release        = make(chan struct{})
		once           sync.Once
	)
	sawAcquire := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		a := cmd.Args()
		if len(a) > 3 && a[0] == "evalsha" && a[1] == acquireScript.Hash() && a[3] == "room:route:{"+room+"}" &&
			old.Load() != nil && !stopped.Load() {
			early.Store(true)
		}
		return next(ctx, cmd)
	}}
	c := standalone(t).client(sawAcquire)
	cfg := testConfig()
	cfg.OnLost = func(l *Lease, _ error) {
		if l == old.Load() {
			close(entered)
			<-release
		}
	}
	cfg.OnEnd = func(l *Lease, _ error) {
		if l == old.Load() {
			stopped.Store(true)
		}
	}
	m := startManager(t, c, cfg)
	proceed := func() { once.Do(func() { close(release) }) }
	t.Cleanup(proceed) // before Stop (cleanups run last first): the renewer must not stay blocked
	l, err := m.Acquire(context.Background(), room)
	require.NoError(t, err, "Acquire")
	old.Store(l)
	require.NoError(t, c.Del(context.Background(), m.nodeKey()).Err(), "DEL %s", m.nodeKey())
	<-entered // the next renewal finds the session gone
	require.Error(t, l.Context().Err(), "OnLost ran before the lease's context was cancelled")
	return &endingLease{m: m, old: l, room: room, early: &early, stopped: &stopped, proceed: proceed}
}

type acquired struct {
	l       *Lease
	err     error
	stopped bool // the old lease's OnEnd had returned when Acquire did
}

// acquireAsync runs Acquire on its own goroutine; the result arrives on
// the returned channel, and done reports whether it has.
func (e *endingLease) acquireAsync(ctx context.Context) (<-chan acquired, func() bool) {
	ch := make(chan acquired, 1)
	var done atomic.Bool
	go func() {
		l, err := e.m.Acquire(ctx, e.room)
		ch <- acquired{l: l, err: err, stopped: e.stopped.Load()}
		done.Store(true)
	}()
	return ch, done.Load
}

// An Acquire of a room whose lease on this Manager is ending (lost, its
// OnLost still running) waits until the old holder has stopped: it neither
// takes the room in Redis nor returns a new lease before OnLost and OnEnd
// returned.
func TestAcquireWaitsForTheEndOfALostLease(t *testing.T) {
	e := startEnding(t, "end-wait")
	res, done := e.acquireAsync(context.Background())
	waitFor(t, "Acquire to wait or to go on", func() bool { return e.waiting() || e.early.Load() || done() })
	if e.early.Load() || done() {
		e.proceed()
		got := <-res
		require.FailNowf(t, "Acquire took the room before the old lease's OnLost returned",
			"script sent: %v; returned %v, %v", e.early.Load(), got.l != nil, got.err)
	}
	e.proceed()
	got := <-res
	require.NoError(t, got.err, "Acquire")
	assert.True(t, got.stopped, "Acquire returned before the old lease's OnEnd returned")
	assert.False(t, e.early.Load(), "the acquire script ran before the old lease's OnEnd returned")
	assert.NotSame(t, e.old, got.l, "want a new lease")
	assert.Greater(t, got.l.Token(), e.old.Token(), "new lease's fence")
	assert.NoError(t, got.l.Context().Err(), "new lease's context ended: %v", context.Cause(got.l.Context()))
}

// The wait for an ending lease is bounded by the caller's ctx.
func TestAcquireWaitForALostLeaseEndsWithCtx(t *testing.T) {
	e := startEnding(t, "end-ctx")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, done := e.acquireAsync(ctx)
	waitFor(t, "Acquire to wait or to go on", func() bool { return e.waiting() || e.early.Load() || done() })
	cancel()
	got := <-res
	assert.ErrorIs(t, got.err, context.Canceled, "Acquire")
	assert.Nil(t, got.l, "Acquire: want no lease")
	assert.False(t, e.early.Load(), "the acquire script ran before the old lease's OnEnd returned")
	assert.False(t, e.stopped.Load(), "OnEnd returned while OnLost was blocked")
}

// A lease ended while the hand-off had it stays in the set until its hooks
// return; an acquisition of its room waits for that within its ctx, rather
// than spinning on a lease it cannot end again.
func TestAcquireWaitsForALeaseEndedInTheHandOff(t *testing.T) {
	b := standalone(t)
	m := startManager(t, b.client(), testConfig())
	ctx := context.Background()
	l, err := m.Acquire(ctx, "handed")
	require.NoError(t, err)
	require.True(t, l.state.CompareAndSwap(stateHeld, stateHandingOff))
	l.state.Store(stateHandedOff) // ended in the hand-off, its hooks still running
	t.Cleanup(func() { m.forget(l) })

	wait, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, _, err := m.attach(wait, time.Now().Add(m.cfg.TTL), "handed"); done <- err }()
	cancel()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled, "attach while the ended lease's hooks run")
	case <-time.After(5 * time.Second):
		m.forget(l) // let the spinning call return
		<-done
		t.Fatal("attach did not return when its ctx ended: it spins on the ended lease")
	}
}
