package lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/testlog"
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
// a TTL) whatever its node's session says, until it expires.
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
	_, err = crashed.stopRenewer(ctx) // it stops renewing, as if killed
	require.NoError(t, err)
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

	// A start cut short while another process's session lives says so,
	// and so does its log: what it waits for is that session, not Redis.
	var logs bytes.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	other, err := New(c, cfg)
	require.NoError(t, err)
	sctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = other.Start(sctx)
	require.ErrorIs(t, err, errSessionBusy, "Start while another process's session lives")
	assert.ErrorContains(t, err, cfg.Node, "Start's error: want the node id named")
	assert.Contains(t, logs.String(), "lease: start waiting for another process's session of this node id")
	assert.Contains(t, logs.String(), `(one NODE_ID for two processes, or two Managers with one NodePrefix?)" node_id=`+cfg.Node, "the waiting line's node id")
	assert.NotContains(t, logs.String(), "waiting for Redis")
}

// A session lost while its leases are still being ended (their OnLost
// running) is not replaced before every one has ended: replacing it frees
// its rooms in Redis, and another node must not take a room whose holder
// has not been told. An Acquire that finds the session overdue meanwhile
// would start one.
func TestNoNewSessionBeforeTheLossHasEndedEveryLease(t *testing.T) {
	c := standalone(t).client()
	ctx := context.Background()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	cfg := testConfig()
	cfg.TTL = time.Minute // the test drives the loss
	cfg.OnLost = func(l *Lease, _ error) {
		if l.ID() == "slow" {
			once.Do(func() { close(entered) })
			<-release
		}
	}
	m := startManager(t, c, cfg)
	l, err := m.Acquire(ctx, "slow")
	require.NoError(t, err)
	epoch := l.epoch
	lost := make(chan struct{})
	go func() { defer close(lost); m.loseSession(epoch, lostError("test")) }()
	<-entered
	started := make(chan error, 1)
	go func() { started <- m.startSession(ctx) }()
	select {
	case err := <-started:
		close(release)
		require.FailNow(t, "a new session started while a lease of the lost one was still being ended", "startSession: %v", err)
	case <-time.After(200 * time.Millisecond):
		// An absence has no event to wait for: the window only decides how
		// surely a start that does not wait is caught, never whether a
		// start that waits passes.
	}
	assert.Equal(t, strconv.FormatInt(epoch, 10), c.HGet(ctx, m.nodeKey(), "epoch").Val(), "session in Redis while the loss runs")
	close(release)
	<-lost
	require.NoError(t, <-started)
	assert.NotEqual(t, epoch, m.sess.Load().epoch, "session after the loss")
}

// A delayed acquire attempt of an ended session (sent before the loss,
// run after a later epoch took the room again) takes nothing: the route's
// later epoch is not its own.
func TestAcquireOfAnEndedSessionLeavesALaterOne(t *testing.T) {
	c := standalone(t).client()
	ctx := context.Background()
	cfg := testConfig()
	cfg.TTL = time.Minute
	m := startManager(t, c, cfg)
	old := m.sess.Load()
	m.loseSession(old.epoch, lostError("test"))
	require.NoError(t, m.startSession(ctx))
	l, err := m.Acquire(ctx, "late")
	require.NoError(t, err)
	res, err := m.acquireCall(ctx, "late", old.args) // the old session's attempt, run late
	require.NoError(t, err)
	code, val, err := acquireReply(res)
	require.NoError(t, err)
	assert.Zero(t, code, "late attempt of epoch %d over %q: got code %d; want refused", old.epoch, l.value, code)
	assert.Equal(t, l.value, val)
	assert.Equal(t, l.value, c.Get(ctx, l.key).Val(), "route after the late attempt")
}

// A late clean-up of an acquire attempt whose reply was lost (the fence
// unknown) deletes only what that attempt could have written: not a route
// the next acquisition of the same session wrote since, with a higher
// fence.
func TestLateCleanUpLeavesALaterAcquisition(t *testing.T) {
	c := standalone(t).client()
	ctx := context.Background()
	cfg := testConfig()
	cfg.TTL = time.Minute
	m := startManager(t, c, cfg)
	s := m.sess.Load()
	fence := c.Get(ctx, m.fenceKey("cleanup")).Val() // none yet: the attempt below sets it
	assert.Empty(t, fence)
	_, err := m.acquireCall(ctx, "cleanup", s.args) // the attempt whose reply was lost
	require.NoError(t, err)
	bound := c.Get(ctx, m.fenceKey("cleanup")).Val() // what the clean-up reads first
	require.NoError(t, m.releaseUnknown(ctx, "cleanup", s.epoch, ""), "clean-up in time")
	require.Zero(t, c.Exists(ctx, m.routeKey("cleanup")).Val(), "route after the clean-up")
	l, err := m.Acquire(ctx, "cleanup") // the next acquisition, a higher fence
	require.NoError(t, err)
	prefix := m.cfg.Node + "|" + strconv.FormatInt(s.epoch, 10) + "|"
	n, err := releaseScript.Run(ctx, c, []string{l.key}, prefix, "session", bound).Int64() // the clean-up's delete, run late
	require.NoError(t, err)
	assert.Equal(t, int64(-1), n, "late clean-up over a later acquisition")
	assert.Equal(t, l.value, c.Get(ctx, l.key).Val(), "route after the late clean-up")
}

// A session start whose reply was lost left this process's session in
// Redis under an epoch it never learnt: the next start replaces it at
// once instead of waiting a TTL for it as if another process's.
func TestStartAfterALostReplyReplacesItsOwnSession(t *testing.T) {
	var drop atomic.Bool
	c := standalone(t).client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		err := next(ctx, cmd)
		if err == nil && isScript(cmd, sessionScript) && drop.CompareAndSwap(true, false) {
			return fmt.Errorf("reply lost: %w", context.DeadlineExceeded) // as a timeout reads
		}
		return err
	}})
	cfg := testConfig()
	cfg.TTL = time.Minute // a wait for the orphan would outlast the test's ctx
	m, err := New(c, cfg)
	require.NoError(t, err)
	drop.Store(true)
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, m.Start(sctx), "Start after its first session start's reply was lost")
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	assert.Equal(t, strconv.FormatInt(m.sess.Load().epoch, 10), c.HGet(sctx, m.nodeKey(), "epoch").Val())
}

// Stop racing a session start (an Acquire's, after the session was lost)
// leaves no session in Redis: the start finishes first and Stop ends it,
// or it sees the Manager stopped and starts none.
func TestStopLeavesNoSessionStartedMeanwhile(t *testing.T) {
	c := standalone(t).client()
	ctx := context.Background()
	m := startManager(t, c, testConfig())
	m.loseSession(m.sess.Load().epoch, lostError("test"))
	done := make(chan error, 1)
	go func() { done <- m.startSession(ctx) }()
	require.NoError(t, m.Stop(ctx))
	err := <-done
	assert.True(t, err == nil || errors.Is(err, ErrNotRunning), "start racing Stop: %v", err)
	assert.Zero(t, c.Exists(ctx, m.nodeKey()).Val(), "session in Redis after Stop")
	assert.ErrorIs(t, m.startSession(ctx), ErrNotRunning, "start after Stop")
}

// TestStartSessionLosesTheOverdueSessionItReplaces: a caller that found
// the session overdue starts the next one (an Acquire, the renewer); if
// the session it found had meanwhile been replaced, and the replacement
// is overdue too, starting the next epoch must still end every lease of
// the one it replaces: its rooms are free in Redis from then on, so a
// holder left with a live context would share its room with the next
// owner.
func TestStartSessionLosesTheOverdueSessionItReplaces(t *testing.T) {
	cfg := testConfig()
	cfg.TTL, cfg.RenewInterval = 3*time.Minute, 50*time.Second // the renewer stays asleep
	m := startManager(t, standalone(t).client(), cfg)
	ctx := context.Background()
	l, err := m.Acquire(ctx, "replaced")
	require.NoError(t, err, "Acquire")
	stale := l.epoch - 1                            // the epoch the caller found overdue, long replaced
	m.okAt.Store(new(time.Now().Add(-m.lostAfter))) // the current one is overdue as well
	m.loseSession(stale, m.lostCause(stale))        // what that caller does first: nothing, as it is not current
	require.NoError(t, m.startSession(ctx), "startSession")

	require.NotEqual(t, l.epoch, m.sess.Load().epoch, "a new epoch: want started")
	assert.ErrorIs(t, context.Cause(l.Context()), ErrLost, "the lease of the replaced epoch: cause")
	assert.Empty(t, m.snapshot(), "leases still held after their session was replaced")
}

// TestLateSessionStartReplacesNothing: a session start whose attempt timed
// out may still reach Redis, after a later attempt started the epoch the
// node now holds rooms under. It must not replace that epoch: another node
// would read the rooms' epoch as dead and take them from live holders.
func TestLateSessionStartReplacesNothing(t *testing.T) {
	b := standalone(t)
	raw := b.client()
	var held atomic.Bool
	type reply struct {
		res []int64
		err error
	}
	deliver, delivered := make(chan struct{}), make(chan reply, 1)
	late := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if isScript(cmd, sessionScript) && held.CompareAndSwap(false, true) {
			args := cmd.Args()
			go func() { // the request is held up in the network, or by a stalled server
				<-deliver
				res, err := raw.Do(context.Background(), args...).Int64Slice()
				delivered <- reply{res, err}
			}()
			<-ctx.Done() // the attempt times out; Start's next one starts the session
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		return next(ctx, cmd)
	}}
	a := startManager(t, b.client(late), testConfig())
	other := startManager(t, b.client(), testConfig())
	ctx := context.Background()
	l, err := a.Acquire(ctx, "late-start")
	require.NoError(t, err, "Acquire")
	close(deliver)
	got := <-delivered
	require.NoError(t, got.err, "the late start reaching Redis")
	require.Equal(t, int64(0), got.res[0], "the late start's answer: want refused, got %v", got.res)

	assert.Equal(t, strconv.FormatInt(l.epoch, 10), raw.HGet(ctx, a.nodeKey(), "epoch").Val(), "the session's epoch in Redis after the late start")
	_, err = other.Acquire(ctx, "late-start")
	assert.ErrorIs(t, err, ErrHeld, "another node's Acquire of the room")
	assert.NoError(t, l.Context().Err(), "the lease after the late start")
}

// TestSessionStartAttempts pins session.lua's rule for a start over this
// process's own session: the same attempt again (go-redis resends a
// command whose reply was lost) gets the epoch it started; a later attempt
// replaces it; an earlier one arriving late is refused, as is any attempt
// of another process while the session lives.
func TestSessionStartAttempts(t *testing.T) {
	c := standalone(t).client()
	ctx := context.Background()
	start := func(holder string, attempt int) []int64 {
		t.Helper()
		res, err := sessionScript.Run(ctx, c, []string{"room:node:{attempts}"}, "0", holder, stateActive, "", 60000, attempt).Int64Slice()
		require.NoError(t, err, "session.lua, holder %s attempt %d", holder, attempt)
		require.Len(t, res, 2)
		return res
	}
	first := start("h", 2)
	require.Equal(t, int64(1), first[0], "the first start")
	assert.Equal(t, first, start("h", 2), "the same attempt again: want the epoch it started")
	assert.Equal(t, int64(0), start("h", 1)[0], "an earlier attempt arriving late: want refused")
	later := start("h", 3)
	assert.Equal(t, int64(1), later[0], "a later attempt: want started")
	assert.Greater(t, later[1], first[1], "a later attempt's epoch")
	assert.Equal(t, int64(0), start("other", 4)[0], "another process's start: want refused")
}

// TestSlowLossStillStartsTheNextSession: losing an overdue session runs
// every lease's OnLost and OnEnd before the next epoch starts. Those hooks
// may outlast a call's budget; the start's call must still get a whole
// CallTimeout of its own, or the renewer leaves the node without a session
// (and every Acquire waiting) for another tick.
func TestSlowLossStillStartsTheNextSession(t *testing.T) {
	cfg := testConfig()
	// The renewer stays asleep; OnLost outlasts a call's budget, as an
	// audit write to a slow store may. The budget is a second: the one
	// start the tick sends must not miss it on a busy machine.
	cfg.TTL, cfg.RenewInterval, cfg.CallTimeout = 3*time.Minute, 50*time.Second, time.Second
	cfg.OnLost = func(*Lease, error) { time.Sleep(2 * cfg.CallTimeout) }
	m := startManager(t, standalone(t).client(), cfg)
	l, err := m.Acquire(context.Background(), "slow-loss")
	require.NoError(t, err, "Acquire")
	m.okAt.Store(new(time.Now().Add(-m.lostAfter))) // overdue

	err = m.tick(context.Background())
	require.ErrorIs(t, err, errSessionLost, "tick over an overdue session")
	assert.ErrorIs(t, context.Cause(l.Context()), ErrLost, "the lease of the overdue session")
	s := m.sess.Load()
	require.NotNil(t, s, "no session after the tick: %v", err)
	assert.NotEqual(t, l.epoch, s.epoch, "the session after the tick: want a new epoch")
}

// A process restarted at once after a kill, with the node id of the one
// killed and a Start given no deadline (lifecycle's OnStart gives none),
// waits the old session out: it lives up to a TTL, and Start's wait, a
// TTL too, left the last retry before its expiry about half the time.
func TestRestartAtOnceWithoutADeadlineWaitsTheOldSessionOut(t *testing.T) {
	c := standalone(t).client()
	ctx := context.Background()
	cfg := testConfig()
	// The killed process's session, just renewed: a full TTL to live.
	key := DefaultNodePrefix + "{" + cfg.Node + "}"
	require.NoError(t, c.HSet(ctx, key, "epoch", "5", "holder", "killed", "attempt", "1", "state", stateActive, "addr", "").Err())
	require.NoError(t, c.PExpire(ctx, key, cfg.TTL).Err())

	next := startManager(t, c, cfg)
	assert.NotEqual(t, int64(5), next.lastEpoch.Load(), "the restarted process's epoch")
}

// TestStartRefusesASessionKeyWithoutTTLAtOnce: a node's session key that
// never expires (no lease Manager wrote it) fails Start at once, saying
// so: waiting for it is no use. Before, Start waited out its whole ctx and
// said the key "expires in -1ms".
func TestStartRefusesASessionKeyWithoutTTLAtOnce(t *testing.T) {
	c := standalone(t).client()
	ctx := context.Background()
	cfg := testConfig()
	m, err := New(c, cfg)
	require.NoError(t, err)
	require.NoError(t, c.HSet(ctx, m.nodeKey(), "epoch", "7", "holder", "someone").Err())
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = m.Start(sctx)
	require.ErrorContains(t, err, m.nodeKey()+" has no TTL")
	assert.NoError(t, sctx.Err(), "Start returned at its ctx's end: want at once")
}

// TestARestartCutShortByStopIsNoFailure: a tick that must start a session
// again while Stop comes gets ErrNotRunning: nothing failed, so no failed
// renewal is counted and no WARN says the session is not started yet.
func TestARestartCutShortByStopIsNoFailure(t *testing.T) {
	var logs bytes.Buffer
	cfg := testConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	m := startManager(t, standalone(t).client(), cfg)
	require.NoError(t, m.Stop(context.Background()))
	require.ErrorIs(t, m.restart(context.Background()), ErrNotRunning)
	assert.Zero(t, testutil.ToFloat64(m.met.heartbeatErrors), "failed renewals counted")
	assert.NotContains(t, logs.String(), "not started again yet")
}

// The renewer's last try before the session's deadline comes a quarter
// interval ahead of it: a primary back between TTL/2 and TTL·2/3 after the
// last confirmed renewal (a Sentinel failover announced late) keeps the
// session. With a try once per interval, the last came at TTL/2 and the
// next at the deadline itself, so such a failover cost every lease. The
// renewals fail at once here (connection refused), as after a crash.
func TestAFailedRenewalIsTriedAgainBeforeTheDeadline(t *testing.T) {
	var failUntil atomic.Int64 // unix nanoseconds; renewals before it are refused
	c := standalone(t).client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if isScript(cmd, sessionRenewScript) && time.Now().UnixNano() < failUntil.Load() {
			return fmt.Errorf("dial tcp: %w", syscall.ECONNREFUSED) // not sent
		}
		return next(ctx, cmd)
	}})
	cfg := testConfig()
	cfg.TTL = 3 * time.Second // RenewInterval 500ms, deadline 2s after the last confirmed renewal
	m := startManager(t, c, cfg)
	l, err := m.Acquire(context.Background(), "room")
	require.NoError(t, err)
	epoch := m.lastEpoch.Load()

	renewed := testutil.ToFloat64(m.met.renewed)
	waitFor(t, "a confirmed renewal", func() bool { return testutil.ToFloat64(m.met.renewed) > renewed })
	// Refused from here until 1.6 s after that renewal was sent: past the
	// renewals at TTL/6, TTL/3 and TTL/2, before the last try at 1.875 s.
	last := *m.okAt.Load()
	failUntil.Store(last.Add(1600 * time.Millisecond).UnixNano())
	renewed = testutil.ToFloat64(m.met.renewed)
	waitFor(t, "a renewal confirmed after the refusals", func() bool { return testutil.ToFloat64(m.met.renewed) > renewed })

	assert.NoError(t, l.Context().Err(), "the lease: want held (cause %v)", context.Cause(l.Context()))
	assert.Equal(t, epoch, m.lastEpoch.Load(), "the session's epoch: want the same session")
	assert.LessOrEqual(t, testutil.ToFloat64(m.met.heartbeatErrors), 3.0, "failed renewals: want one per interval, no more")
}

// incHook is a Counter whose Inc runs fn first: a point in the code between
// two steps that a test can act at.
type incHook struct {
	prometheus.Counter
	fn func()
}

func (c incHook) Inc() { c.fn(); c.Counter.Inc() }

// A start of the renewer's that fails while an Acquire's start succeeds is
// not recorded once the Acquire's session is current: a failed start kept
// beside a current session would suppress the next outage's WARN and be
// named in errors about it.
func TestAFailedStartIsNotKeptOnceAnotherStarted(t *testing.T) {
	var logs bytes.Buffer
	c := standalone(t).client()
	cfg := testConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	m, err := New(c, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	ctx := context.Background()
	// Another process's session of the node id: the renewer's start fails.
	require.NoError(t, c.HSet(ctx, m.nodeKey(), "epoch", 1, "holder", "another process", "attempt", 1).Err())
	require.NoError(t, c.PExpire(ctx, m.nodeKey(), time.Minute).Err())
	m.met.heartbeatErrors = incHook{Counter: m.met.heartbeatErrors, fn: func() {
		// Before the renewer records its failure: that process is gone, and an Acquire starts a session.
		require.NoError(t, c.Del(ctx, m.nodeKey()).Err())
		require.NoError(t, m.startSession(ctx), "the Acquire's start")
	}}
	require.ErrorIs(t, m.restart(ctx), errSessionBusy)
	require.NotNil(t, m.sess.Load(), "the Acquire's session")
	if got := m.startErr.Load(); got != nil {
		t.Errorf("failed start kept beside a current session: %v; want none", *got)
	}
	assert.NotContains(t, logs.String(), "not started again yet")
}

// A session lost as overdue and started again by an Acquire (the renewer
// starved, say) is logged as one started by the renewer is: the WARN
// "lease session lost" gets its "lease session started again" line, with
// the new epoch.
func TestASessionStartedAgainByAnAcquireIsLogged(t *testing.T) {
	var logs testlog.Buffer
	cfg := testConfig()
	cfg.TTL, cfg.RenewInterval = 3*time.Minute, 50*time.Second // the renewer stays asleep
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))     // INFO and up
	m := startManager(t, standalone(t).client(), cfg)
	ctx := context.Background()
	_, err := m.Acquire(ctx, "room")
	require.NoError(t, err)
	m.okAt.Store(new(time.Now().Add(-m.lostAfter))) // overdue
	_, err = m.Acquire(ctx, "room")
	require.NoError(t, err, "Acquire under an overdue session")
	out := logs.String()
	require.Contains(t, out, "lease session lost")
	assert.Equal(t, 1, strings.Count(out, "lease session started again"), "lines for the new session:\n%s", out)
}
