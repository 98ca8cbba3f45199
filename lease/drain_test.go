package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/drain"
)

func TestDrainGate(t *testing.T) {
	b := standalone(t)
	c := b.client()
	m := startManager(t, c, testConfig())
	ctx := context.Background()

	m.BeginDrain()
	_, err := m.Acquire(ctx, "after-flip")
	require.ErrorIs(t, err, ErrDraining, "Acquire after the gate closed")
	require.Zero(t, c.Exists(ctx, m.routeKey("after-flip")).Val(), "route key written after the flip; want none")
	waitFor(t, "session marked draining", func() bool {
		return c.HGet(ctx, m.nodeKey(), "state").Val() == stateDraining
	})
}

// TestDrainRace flips the gate while the acquire script runs: the script
// succeeds, the gate is closed by the time it returns, so the lease is
// released and Acquire returns ErrDraining.
func TestDrainRace(t *testing.T) {
	b := standalone(t)
	var mp atomic.Pointer[Manager]
	flip := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		err := next(ctx, cmd)
		m := mp.Load()
		if args := cmd.Args(); m != nil && len(args) > 3 && args[3] == m.routeKey("race") {
			m.BeginDrain() // the flip lands between the script and the registration
		}
		return err
	}}
	c := b.client(flip)
	m := startManager(t, c, testConfig())
	mp.Store(m)
	ctx := context.Background()
	l, err := m.Acquire(ctx, "race")
	require.ErrorIs(t, err, ErrDraining, "Acquire racing the flip")
	require.Nil(t, l, "Acquire racing the flip")
	require.Zero(t, c.Exists(ctx, m.routeKey("race")).Val(), "lease acquired across the flip still in Redis; want released")
	require.Empty(t, m.snapshot(), "leases the manager holds")
}

// TestHandOff flushes rooms with bounded concurrency: flushed rooms are
// released one by one, failed rooms stay owned until the release hook
// ends the session, last, which frees them at once.
func TestHandOff(t *testing.T) {
	b := standalone(t)
	var (
		logMu sync.Mutex
		log   []string // keys of scripts, in the order Redis got them
	)
	record := func(cmd redis.Cmder) {
		if args := cmd.Args(); len(args) > 3 && strings.HasPrefix(cmd.Name(), "eval") {
			logMu.Lock()
			log = append(log, fmt.Sprint(args[3]))
			logMu.Unlock()
		}
	}
	recorder := pipelineHook{fn: func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		for _, c := range cmds {
			record(c)
		}
		return next(ctx, cmds)
	}}
	singles := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		record(cmd)
		return next(ctx, cmd)
	}}
	c := b.client(recorder, singles)
	cfg := testConfig()
	m := startManager(t, c, cfg)
	ctx := context.Background()

	leases := map[string]*Lease{}
	for _, id := range []string{"ok-1", "ok-2", "ok-3", "ok-slow", "fail-1", "fail-2"} {
		l, err := m.Acquire(ctx, id)
		require.NoError(t, err, "Acquire %s", id)
		leases[id] = l
	}
	m.BeginDrain()

	hook, err := m.HandOff(func(ctx context.Context, l *Lease) error {
		switch {
		case strings.HasPrefix(l.ID(), "fail"):
			return errors.New("snapshot store down")
		case l.ID() == "ok-slow":
			// Rooms move one by one: ok-1 is released while this room is
			// still flushing, not after the slowest room. The flush runs on
			// a hand-off goroutine: eventually, not waitFor's FailNow.
			eventually(t, "ok-1 released during another room's flush", func() bool {
				return c.Exists(ctx, leases["ok-1"].key).Val() == 0
			})
		}
		return nil
	}, 2)
	require.NoError(t, err, "HandOff")
	require.NoError(t, hook.Validate(), "HandOff hook: validation")
	require.Equal(t, drain.Flush, hook.Phase, "HandOff hook: phase")
	err = hook.Run(ctx)
	require.ErrorContains(t, err, "4 released, 2 left to expire, 0 lost", "HandOff")
	assert.ErrorContains(t, err, "rooms fail-1, fail-2: snapshot store down", "HandOff: a cause with its rooms")
	assert.Equal(t, 1, strings.Count(err.Error(), "snapshot store down"), "HandOff: %q: want each cause once", err)
	for id, l := range leases {
		exists := c.Exists(ctx, l.key).Val() == 1
		failed := strings.HasPrefix(id, "fail")
		assert.Equal(t, failed, exists, "room %s: key exists; want it only for failed rooms, left to expire", id)
		want := ErrReleased
		if strings.HasPrefix(id, "fail") {
			want = ErrLeftToExpire
		}
		assert.ErrorIs(t, context.Cause(l.Context()), want, "room %s: cause", id)
	}

	release := m.ReleaseHook()
	require.Equal(t, drain.Release, release.Phase, "ReleaseHook phase")
	logMu.Lock()
	log = nil
	logMu.Unlock()
	require.NoError(t, release.Run(ctx), "ReleaseHook")
	require.Zero(t, c.Exists(ctx, m.nodeKey()).Val(), "session exists after the release hook; want ended")
	logMu.Lock()
	require.Equal(t, []string{m.nodeKey()}, log, "scripts during release; want the session's end only")
	logMu.Unlock()
	next := startManager(t, c, testConfig())
	for _, id := range []string{"fail-1", "fail-2"} {
		l, err := next.Acquire(ctx, id)
		if assert.NoError(t, err, "Acquire of unflushed room %s after the session ended", id) {
			assert.Greater(t, l.Token(), leases[id].Token(), "room %s: fence of the next owner", id)
		}
	}
}

// TestReleaseHookWithoutHandOff ends every lease, then the session in one
// call, whatever the number of leases: every room is free at once.
func TestReleaseHookWithoutHandOff(t *testing.T) {
	b := standalone(t)
	var sent atomic.Int32
	c := b.client(countCommands(&sent))
	cfg := testConfig()
	cfg.TTL = 30 * time.Second // no renewal round is counted
	m := startManager(t, c, cfg)
	ctx := context.Background()
	var ls []*Lease
	for i := range 50 {
		l, err := m.Acquire(ctx, fmt.Sprintf("batch-%d", i))
		require.NoError(t, err, "Acquire")
		ls = append(ls, l)
	}
	m.BeginDrain() // the renewer marks the session draining: not the release's
	waitFor(t, "the session marked draining", func() bool { return c.HGet(ctx, m.nodeKey(), "state").Val() == stateDraining })
	sent.Store(0)
	require.NoError(t, m.ReleaseHook().Run(ctx), "release hook")
	assert.EqualValues(t, 1, sent.Load(), "commands sent by the release hook for 50 leases")
	assert.Zero(t, c.Exists(ctx, m.nodeKey()).Val(), "session exists after the release hook; want ended")
	next := startManager(t, c, testConfig())
	for _, l := range ls {
		assert.ErrorIs(t, context.Cause(l.Context()), ErrReleased, "%s: cause", l.label())
		_, err := next.Acquire(ctx, l.ID())
		assert.NoError(t, err, "%s: Acquire by the next node", l.label())
	}
	_, err := m.Acquire(ctx, "late")
	require.ErrorIs(t, err, ErrDraining, "Acquire after the release hook")
}

// A drain cut short (a second signal, or its deadline) skips phase
// Release; the Release hook's Abort ends the session then, so the rooms
// are free at once, with or without fx (fx's OnStop Stop came after, and a
// service without fx had nothing that would).
func TestAForcedDrainEndsTheSession(t *testing.T) {
	b := standalone(t)
	c := b.client()
	m := startManager(t, c, testConfig())
	l, err := m.Acquire(context.Background(), "forced")
	require.NoError(t, err, "Acquire")
	handOff, err := m.HandOff(func(context.Context, *Lease) error { return nil }, 1)
	require.NoError(t, err)
	forced, force := context.WithCancel(context.Background())
	force() // the second signal, before the hand-off
	rep := drain.Run(forced, "test", []drain.Hook{handOff, m.ReleaseHook()})
	require.True(t, rep.Forced, "the drain forced")
	<-m.aborted // the Stop the Abort started: it waited for it, but only a CallTimeout
	assert.Zero(t, c.Exists(context.Background(), m.nodeKey()).Val(), "the session after a forced drain; want ended")
	assert.ErrorIs(t, context.Cause(l.Context()), ErrLeftToExpire, "the lease's cause: not flushed")
	_, err = startManager(t, c, testConfig()).Acquire(context.Background(), "forced")
	assert.NoError(t, err, "Acquire by the next node at once")
}

// The Release hook's Abort returns though the Stop it starts cannot end
// (an OnEnd hook that does not return holds the Stop the deadline cut off,
// which holds the Abort's): an Abort must return promptly, and drain.Run
// waited for this one for as long as the hook did.
func TestTheReleaseHooksAbortReturnsWhileStopWaits(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	cfg := testConfig()
	cfg.OnEnd = func(*Lease, error) { <-release }
	m := startManager(t, standalone(t).client(), cfg)
	_, err := m.Acquire(context.Background(), "stuck")
	require.NoError(t, err, "Acquire")
	defer once.Do(func() { close(release) })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	ran := make(chan *drain.Report, 1)
	go func() { ran <- drain.Run(ctx, "test", []drain.Hook{m.ReleaseHook()}) }()
	select {
	case rep := <-ran:
		assert.True(t, rep.DeadlineExceeded, "the drain ran out of time")
	case <-time.After(10 * time.Second): // a guard against a hang, not a bound being measured
		t.Fatal("drain.Run still waiting for the Release hook's Abort 10 s after its deadline")
	}
	once.Do(func() { close(release) })
	<-m.aborted
}

// TestStopEndsTheSession: Stop ends every lease and the session at once,
// telling holders before Redis; their rooms are free.
func TestStopEndsTheSession(t *testing.T) {
	b := standalone(t)
	c := b.client()
	m := startManager(t, c, testConfig())
	ctx := context.Background()
	l, err := m.Acquire(ctx, "stop")
	require.NoError(t, err, "Acquire")
	require.NoError(t, m.Stop(ctx), "Stop")
	require.ErrorIs(t, context.Cause(l.Context()), ErrReleased, "cause after Stop")
	require.Zero(t, c.Exists(ctx, m.nodeKey()).Val(), "session exists after Stop; want ended")
	require.ErrorIs(t, l.Release(ctx), ErrNotHeld, "Release after Stop")
	_, err = m.Acquire(ctx, "after-stop")
	require.ErrorIs(t, err, ErrNotRunning, "Acquire after Stop")
	_, err = startManager(t, c, testConfig()).Acquire(ctx, "stop")
	require.NoError(t, err, "Acquire by the next node after Stop")
}

// A holder that releases its lease after the hand-off left it unflushed (a
// deferred Release in the room's worker, whose context the drain just
// cancelled) must not delete the key: the room was not flushed, and moves
// only with the session's end. Release used to delete it.
func TestReleaseKeepsALeaseLeftToExpire(t *testing.T) {
	b := standalone(t)
	c := b.client()
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		during bool // a holder also releases while the hand-off flushes the room
	}{{"by the hand-off", false}, {"during the hand-off", true}} {
		t.Run(tt.name, func(t *testing.T) {
			m, l := handOffLease(t, c, strings.ReplaceAll(tt.name, " ", "-"))
			var during, liveAfter error
			hook, err := m.HandOff(func(context.Context, *Lease) error {
				if tt.during { // say, the holder believed the room flushed
					during = l.Release(ctx)
					liveAfter = l.Context().Err() // the hand-off's still
				}
				return errors.New("snapshot store down")
			}, 1)
			require.NoError(t, err, "HandOff")
			require.Error(t, hook.Run(ctx), "HandOff with a failing flush: want the room left to expire")
			if tt.during {
				assert.ErrorIs(t, during, ErrDraining, "Release during the hand-off (the hand-off decides)")
				assert.NoError(t, liveAfter, "lease context after a Release during the hand-off: want it still live (the hand-off decides)")
			}
			assert.ErrorIs(t, l.Release(ctx), ErrLeftToExpire, "Release after the hand-off left the lease to expire")
			assert.Equal(t, int64(1), c.Exists(ctx, l.key).Val(), "Exists(key of an unflushed room) after a Release: want 1 (left to expire)")
		})
	}
}

// Once the hand-off has taken a lease, a holder's Release sends nothing,
// also after the hand-off released the lease (a second compare-and-DEL
// racing the hand-off's own could make it count a flushed room as lost)
// and after the lease was lost while the hand-off had it (its key, still
// ours if lost renewal replies kept it alive, must be left to expire).
func TestReleaseAfterTheHandOffTouchesNothing(t *testing.T) {
	b := standalone(t)
	var releases atomic.Int32 // release scripts sent
	c := b.client(pipelineHook{fn: func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		for _, cmd := range cmds {
			if isScript(cmd, releaseScript) {
				releases.Add(1)
			}
		}
		return next(ctx, cmds)
	}})
	ctx := context.Background()
	for _, tt := range []struct {
		name    string
		lose    bool // the lease is lost while its room is flushed
		wantKey int64
	}{{"released by the hand-off", false, 0}, {"lost while the hand-off had it", true, 1}} {
		t.Run(tt.name, func(t *testing.T) {
			m, l := handOffLease(t, c, strings.ReplaceAll(tt.name, " ", "-"))
			hook, err := m.HandOff(func(context.Context, *Lease) error {
				if tt.lose { // the session lost: the renewer would end its leases
					m.loseSession(l.epoch, lostError("test"))
				}
				return nil
			}, 1)
			require.NoError(t, err, "HandOff")
			_ = hook.Run(ctx) // a lost lease is no hand-off error; its outcome is checked below
			before := releases.Load()
			assert.ErrorIs(t, l.Release(ctx), ErrDraining, "Release after the hand-off (the hand-off decided)")
			assert.Zero(t, releases.Load()-before, "release scripts sent by the holder's Release")
			assert.Equal(t, tt.wantKey, c.Exists(ctx, l.key).Val(), "Exists(key) after the hand-off and a Release")
		})
	}
}

// handOffLease starts a Manager on c and acquires id.
func handOffLease(t *testing.T, c redis.UniversalClient, id string) (*Manager, *Lease) {
	t.Helper()
	cfg := testConfig()
	m := startManager(t, c, cfg)
	l, err := m.Acquire(context.Background(), id)
	require.NoError(t, err, "Acquire")
	return m, l
}

// A hand-off that lost a primary leaves thousands of rooms to expire for
// one cause: its error says the cause once and names a few rooms, so the
// drain report stays a line that a log shipper keeps whole.
func TestLeftToExpireSaysEachCauseOnce(t *testing.T) {
	down := errors.New("release: dial tcp 10.0.0.2:6379: connect: connection refused")
	var left leftToExpire
	for i := range 2000 {
		left.add(fmt.Sprintf("r%04d", i), down)
	}
	left.add("x", errors.New("snapshot store down"))
	err := left.err()
	assert.Equal(t, 2001, left.n)
	assert.Equal(t, "rooms r0000, r0001, r0002, r0003, r0004, r0005, r0006, r0007, r0008, r0009 and 1990 more: "+down.Error()+
		"\nroom x: snapshot store down", err.Error())
	assert.ErrorIs(t, err, down, "the cause stays matchable")
}

// A room lost after the flip, before the hand-off took it (a failover that
// lost the session), was not handed off either: the hand-off's line counts
// it, or the drain of a node that lost every room reads clean.
func TestHandOffCountsRoomsLostSinceTheFlip(t *testing.T) {
	b := standalone(t)
	ctx := context.Background()
	var logs logBuffer
	cfg := testConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	c := b.client()
	m := startManager(t, c, cfg)
	l, err := m.Acquire(ctx, "gone")
	require.NoError(t, err)
	hook, err := m.HandOff(func(context.Context, *Lease) error { return nil }, 1)
	require.NoError(t, err)
	m.BeginDrain()
	require.NoError(t, c.Del(ctx, m.nodeKey()).Err()) // the session ends in Redis
	select {
	case <-l.Context().Done():
	case <-time.After(10 * time.Second): // bounds a hang only: the renewer finds it within a tick
		t.Fatal("the lease outlived its session")
	}
	require.ErrorIs(t, context.Cause(l.Context()), ErrLost)
	require.NoError(t, hook.Run(ctx))
	assert.Contains(t, logs.String(), "released=0 left_to_expire=0 lost=1", logs.String())
}

// Before Start, Acquire says ErrNotRunning, and ErrDraining once the
// drain began (a drain can begin before the start ended): either names
// the room's key.
func TestAcquireBeforeStartSaysNotRunningOrDraining(t *testing.T) {
	m, err := New(standalone(t).client(), testConfig())
	require.NoError(t, err)
	_, err = m.Acquire(context.Background(), "early")
	require.ErrorIs(t, err, ErrNotRunning, "Acquire before Start")
	assert.ErrorContains(t, err, "room:route:{early}")
	m.BeginDrain()
	_, err = m.Acquire(context.Background(), "early")
	require.ErrorIs(t, err, ErrDraining, "Acquire before Start, once BeginDrain was called")
	assert.ErrorContains(t, err, "room:route:{early}")
}
