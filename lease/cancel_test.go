package lease

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAcquireCancelledAtEveryStep ends the caller's context at each step
// of Acquire. The caller either gets the lease, held and renewed, or the
// lease is never registered and its key is gone from Redis: no room may
// stay owned by a lease nobody holds.
func TestAcquireCancelledAtEveryStep(t *testing.T) {
	tests := []struct {
		name string
		// around wraps the acquire script's call; cancel ends the caller's
		// context, returned is closed once Acquire returned.
		around func(cancel func(), returned <-chan struct{}, call func() error) error
	}{
		{"before the call", nil},
		{"before the script is sent", func(cancel func(), returned <-chan struct{}, call func() error) error {
			cancel()
			waitClosed(t, returned, "Acquire to return")
			return call()
		}},
		{"while the script runs", func(cancel func(), returned <-chan struct{}, call func() error) error {
			cancel()
			return call()
		}},
		{"after the reply, before the lease is registered", func(cancel func(), returned <-chan struct{}, call func() error) error {
			err := call()
			cancel()
			waitClosed(t, returned, "Acquire to return")
			return err
		}},
	}
	b := standalone(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				armed         atomic.Bool
				ran           = make(chan struct{})
				returned      = make(chan struct{})
				ctx, cancel   = context.WithCancel(context.Background())
				acquireScript = func(cmd redis.Cmder) bool {
					return strings.HasPrefix(cmd.Name(), "eval") && armed.Load()
				}
			)
			defer cancel()
			hook := cmdHook{fn: func(hctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				if !acquireScript(cmd) || !armed.CompareAndSwap(true, false) {
					return next(hctx, cmd)
				}
				defer close(ran)
				call := func() error { return next(hctx, cmd) }
				return tt.around(cancel, returned, call)
			}}
			c := b.client(hook)
			m := startManager(t, c, testConfig())
			id := "cancel-" + strings.ReplaceAll(tt.name, " ", "-")
			id = strings.ReplaceAll(id, ",", "")
			if tt.around == nil {
				cancel()
			} else {
				armed.Store(true)
			}

			l, err := m.Acquire(ctx, id)
			close(returned)
			if tt.around != nil {
				waitClosed(t, ran, "the acquire script's reply")
			}
			if err == nil {
				requireHeld(t, m, c, l, m.routeKey(id))
				return
			}
			require.ErrorIs(t, err, context.Canceled, "Acquire: want the lease or context.Canceled")
			// The acquisition may still finish in the background; it must
			// end with the room free and nothing registered.
			waitFor(t, "the unheld lease to be released", func() bool {
				return len(m.snapshot()) == 0 && c.Exists(context.Background(), m.routeKey(id)).Val() == 0
			})
		})
	}
}

// waitClosed waits for ch, failing the test after 5 s. It runs in Redis
// hooks too, off the test's goroutine: it fails without stopping the test.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		assert.Fail(t, "timed out waiting for "+what)
	}
}

// requireHeld requires l to be held, the one lease m registered, and its
// key to be in Redis.
func requireHeld(t *testing.T, m *Manager, c redis.UniversalClient, l *Lease, key string) {
	t.Helper()
	require.True(t, l.held(), "lease %v: want held", l)
	require.Len(t, m.snapshot(), 1, "leases registered")
	require.Equal(t, int64(1), c.Exists(context.Background(), key).Val(), "lease %v: want its key in Redis", l)
}

// TestAcquireSharedFlightOutlivesOneCaller: callers of one room share the
// script call; one giving up fails neither the call nor the others.
func TestAcquireSharedFlightOutlivesOneCaller(t *testing.T) {
	b := standalone(t)
	var armed atomic.Bool
	gate := make(chan struct{})
	hook := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if strings.HasPrefix(cmd.Name(), "eval") && armed.CompareAndSwap(true, false) {
			waitClosed(t, gate, "both callers to wait and one to give up")
		}
		return next(ctx, cmd)
	}}
	c := b.client(hook)
	m := startManager(t, c, testConfig())
	waiters := func(n int) func() bool {
		return func() bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			f := m.flights["shared"]
			return f != nil && f.waiters == n
		}
	}
	armed.Store(true)
	ctxA, cancelA := context.WithCancel(context.Background())
	errA := make(chan error, 1)
	go func() { _, err := m.Acquire(ctxA, "shared"); errA <- err }()
	waitFor(t, "the first caller to wait", waiters(1))
	type result struct {
		l   *Lease
		err error
	}
	resB := make(chan result, 1)
	go func() { l, err := m.Acquire(context.Background(), "shared"); resB <- result{l, err} }()
	waitFor(t, "the second caller to join", waiters(2))
	cancelA()
	require.ErrorIs(t, <-errA, context.Canceled, "cancelled caller")
	close(gate)
	r := <-resB
	require.NoError(t, r.err, "remaining caller: want the lease")
	requireHeld(t, m, c, r.l, r.l.key)
}

// TestAcquireJoinsAfterEveryCallerLeft: a caller that arrives after every
// earlier caller of the room gave up, while the acquisition is still
// running, gets an acquisition of its own ctx, not the earlier callers'
// cancellation: a failed attempt is retried for it.
func TestAcquireJoinsAfterEveryCallerLeft(t *testing.T) {
	b := standalone(t)
	gate := make(chan struct{})
	var calls atomic.Int32
	hook := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if isAcquire(cmd) && calls.Add(1) == 1 {
			waitClosed(t, gate, "the second caller to join")
			return context.DeadlineExceeded // the first attempt times out
		}
		return next(ctx, cmd)
	}}
	c := b.client(hook)
	cfg := testConfig()
	cfg.TTL = 6 * time.Second
	m := startManager(t, c, cfg)
	waiters := func(n int) func() bool {
		return func() bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			f := m.flights["rejoined"]
			return f != nil && f.waiters == n
		}
	}
	ctxA, cancelA := context.WithCancel(context.Background())
	errA := make(chan error, 1)
	go func() { _, err := m.Acquire(ctxA, "rejoined"); errA <- err }()
	waitFor(t, "the first caller to wait", waiters(1))
	cancelA()
	require.ErrorIs(t, <-errA, context.Canceled, "first caller")
	type result struct {
		l   *Lease
		err error
	}
	resB := make(chan result, 1)
	go func() { l, err := m.Acquire(context.Background(), "rejoined"); resB <- result{l, err} }()
	waitFor(t, "the second caller to wait", waiters(1)) // the first left: 0 until the second joins
	close(gate)
	r := <-resB
	require.NoError(t, r.err, "second caller, ctx live: want the lease")
	requireHeld(t, m, c, r.l, r.l.key)
	settled(t, m)
}

// cleanupRace is an acquisition of room "cleanup" whose reply was lost
// and whose only caller gave up, so that it deletes whatever value of this
// Manager the key holds (the fence it may have written is unknown); the
// clean-up is held back, for up to a second, until a second acquisition's
// script has run.
type cleanupRace struct {
	m                         *Manager
	c                         redis.UniversalClient
	acquires                  atomic.Int32
	afterFlip                 atomic.Int32 // acquire scripts sent with the gate closed
	cleanedUp, secondBeforeIt atomic.Bool
}

// startCleanupRace returns once the clean-up has started.
func startCleanupRace(t *testing.T) *cleanupRace {
	r := new(cleanupRace)
	var (
		mgr            atomic.Pointer[Manager]
		cleanups       atomic.Int32
		firstRan       = make(chan struct{})
		callerLeft     = make(chan struct{})
		cleanupStarted = make(chan struct{})
		secondRan      = make(chan struct{})
	)
	hook := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		switch {
		case isAcquire(cmd):
			n := r.acquires.Add(1)
			if mgr.Load().draining() {
				r.afterFlip.Add(1)
			}
			if n == 2 && !r.cleanedUp.Load() {
				r.secondBeforeIt.Store(true)
			}
			err := next(ctx, cmd)
			switch n {
			case 1: // applied, but its reply is lost once its caller has gone
				close(firstRan)
				waitClosed(t, callerLeft, "the first caller to give up")
				return context.DeadlineExceeded
			case 2:
				close(secondRan)
			}
			return err
		case isReleaseHolder(cmd) && cleanups.Add(1) == 1:
			close(cleanupStarted)
			// A second acquisition must not run before the clean-up.
			// Without the wait it would run within milliseconds, so the
			// clean-up holds back up to a second to let it show.
			select {
			case <-secondRan:
			case <-time.After(time.Second):
			}
			err := next(ctx, cmd)
			r.cleanedUp.Store(err == nil)
			return err
		}
		return next(ctx, cmd)
	}}
	r.c = standalone(t).client(hook)
	cfg := testConfig()
	cfg.TTL = 12 * time.Second // CallTimeout 2 s: the held-back clean-up still runs in its call
	r.m = startManager(t, r.c, cfg)
	mgr.Store(r.m)
	ctxA, cancelA := context.WithCancel(context.Background())
	errA := make(chan error, 1)
	go func() { _, err := r.m.Acquire(ctxA, "cleanup"); errA <- err }()
	waitClosed(t, firstRan, "the first acquire script")
	cancelA()
	require.ErrorIs(t, <-errA, context.Canceled, "first caller")
	close(callerLeft)
	waitClosed(t, cleanupStarted, "the clean-up of the unseen acquisition")
	return r
}

// TestAcquireWaitsForTheEarlierFlightsCleanUp: a caller arriving during
// the clean-up must wait for it, not start an acquisition of its own
// beside it: the clean-up would delete the new lease's key, leaving a
// lease held whose room any node can take.
func TestAcquireWaitsForTheEarlierFlightsCleanUp(t *testing.T) {
	r := startCleanupRace(t)
	l, err := r.m.Acquire(context.Background(), "cleanup")
	require.NoError(t, err, "second caller: want the lease")
	settled(t, r.m)
	assert.False(t, r.secondBeforeIt.Load(), "second acquisition ran before the clean-up; want after it")
	assert.True(t, r.cleanedUp.Load(), "clean-up not done; want the second acquisition after it")
	got := r.c.Get(context.Background(), l.key).Val()
	require.True(t, l.held(), "lease %s: want held", l.label())
	require.Equal(t, l.value, got, "lease %s: want its value in Redis", l.label())
}

// TestAcquireWaitingAcrossTheFlipSendsNothing: a caller that waited for
// the clean-up while the drain flipped gets ErrDraining, and no acquire
// script is sent after the flip (invariant 2). It calls attach, where the
// caller waits, directly: Acquire's own gate check comes before it.
func TestAcquireWaitingAcrossTheFlipSendsNothing(t *testing.T) {
	r := startCleanupRace(t)
	r.m.BeginDrain()
	_, f, err := r.m.attach(context.Background(), time.Now().Add(r.m.cfg.TTL), "cleanup")
	if err == nil {
		<-f.done
		err = f.err
	}
	assert.ErrorIs(t, err, ErrDraining, "caller waiting across the flip")
	settled(t, r.m)
	assert.Zero(t, r.afterFlip.Load(), "acquire scripts sent after the flip")
}

// isReleaseHolder reports whether cmd runs release.lua for any value of a
// session (the fence unknown).
func isReleaseHolder(cmd redis.Cmder) bool {
	args := cmd.Args()
	return isScript(cmd, releaseScript) && len(args) > 1 && args[len(args)-2] == "session" // ... prefix, "session", fence
}

// TestAnAcquireThatGivesUpSaysWhatItWaitedOut: an Acquire whose ctx ends
// while Redis refuses its attempts, or while the node's session cannot
// start again, names that cause beside ctx's error; it used to say only
// "context deadline exceeded", whatever kept it waiting.
func TestAnAcquireThatGivesUpSaysWhatItWaitedOut(t *testing.T) {
	refused := fmt.Errorf("dial tcp 127.0.0.1:1: connect: %w", syscall.ECONNREFUSED)
	tests := []struct {
		name        string
		fail        func(redis.Cmder) bool // the commands refused
		sessionLost bool                   // Acquire once the session is lost and its start failed
		want        string
	}{
		{"attempts refused", func(cmd redis.Cmder) bool { return isScript(cmd, acquireScript) }, false,
			"(last attempt: dial tcp 127.0.0.1:1: connect: connection refused)"},
		{"session not started again", func(cmd redis.Cmder) bool {
			return isScript(cmd, sessionRenewScript) || isScript(cmd, sessionScript)
		}, true, "(waiting for the node's session to start again: session room:node:{"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var failing atomic.Bool
			c := standalone(t).client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				if failing.Load() && tt.fail(cmd) {
					return refused
				}
				return next(ctx, cmd)
			}})
			m := startManager(t, c, testConfig())
			failing.Store(true)
			if tt.sessionLost {
				waitFor(t, "the session lost and its start failed", func() bool { return m.sess.Load() == nil && m.startErr.Load() != nil })
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err := m.Acquire(ctx, "room")
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Contains(t, err.Error(), tt.want)
			failing.Store(false) // the flight, left behind, ends; Stop waits for it
		})
	}
}

// TestAnAcquireLeavesAtItsCtxWhileItsFailedAcquisitionCleansUp: the flip
// comes during an attempt whose reply is lost, so the acquisition fails
// and deletes the route that attempt may have written, retried while the
// session lives whatever the caller's ctx. A caller whose ctx ends meanwhile
// returns at once: the result is an error, so it loses nothing by leaving.
// It waited for the clean-up before (up to a TTL with Redis failing).
func TestAnAcquireLeavesAtItsCtxWhileItsFailedAcquisitionCleansUp(t *testing.T) {
	var m *Manager
	var armed atomic.Bool
	cleaning, cleanup := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		switch {
		case isScript(cmd, acquireScript) && armed.CompareAndSwap(true, false):
			if err := next(ctx, cmd); err != nil {
				return err
			}
			m.BeginDrain() // the flip, while the attempt's reply is on its way
			return fmt.Errorf("reply lost: %w", context.DeadlineExceeded)
		case isReleaseHolder(cmd):
			once.Do(func() { close(cleaning) })
			<-cleanup // the clean-up's call hangs until the test is done
		}
		return next(ctx, cmd)
	}}
	m = startManager(t, standalone(t).client(hook), testConfig())
	defer close(cleanup) // before Stop, which waits for the acquisition
	armed.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := m.Acquire(ctx, "r")
		errc <- err
	}()
	<-cleaning // decided: the attempt failed, and its route is being deleted
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
		assert.ErrorContains(t, err, "reply lost", "what the acquisition waited out")
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire still waiting for its acquisition's clean-up after its ctx ended")
	}
}

// TestAnAcquireWhoseSessionDoesNotStartAgainSaysLost: an Acquire with time
// to spare, while the node's session cannot start again, fails once the
// Manager's own wait for it (a TTL, once more after the first) is over,
// with an error matching ErrLost and naming the start's failure: not one
// matching context.DeadlineExceeded, which reads as the caller's own
// deadline (a new user's trial took it for that). So it does when the
// session is overdue rather than lost when the Acquire comes, and its
// acquisition tries to start the next one itself (a review).
func TestAnAcquireWhoseSessionDoesNotStartAgainSaysLost(t *testing.T) {
	for _, how := range []string{"lost", "overdue"} {
		t.Run(how, func(t *testing.T) {
			var failing atomic.Bool
			c := standalone(t).client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				if failing.Load() && (isScript(cmd, sessionRenewScript) || isScript(cmd, sessionScript)) {
					return fmt.Errorf("dial tcp 127.0.0.1:1: connect: %w", syscall.ECONNREFUSED) // not sent
				}
				return next(ctx, cmd)
			}})
			cfg := testConfig()
			m := startManager(t, c, cfg)
			failing.Store(true)
			defer failing.Store(false)
			if how == "lost" {
				waitFor(t, "the session lost and its start failed", func() bool { return m.sess.Load() == nil && m.startErr.Load() != nil })
			} else {
				// Once a renewal has failed, none in flight can confirm the session again.
				waitFor(t, "a failed renewal", func() bool { return testutil.ToFloat64(m.met.heartbeatErrors) > 0 })
				m.okAt.Store(new(time.Now().Add(-m.lostAfter))) // no renewal confirmed for TTL·2/3: overdue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*cfg.TTL)
			defer cancel()
			_, err := m.Acquire(ctx, "room")
			require.ErrorIs(t, err, ErrLost)
			assert.NotErrorIs(t, err, context.DeadlineExceeded)
			assert.NoError(t, ctx.Err(), "the caller's ctx")
			assert.ErrorContains(t, err, "did not start again within a TTL")
			assert.ErrorContains(t, err, "connection refused", "what the start ran into")
		})
	}
}

// An Acquire's attempts go on as long as its ctx lasts, not a TTL: a
// room's primary down for longer (a Cluster failover of its slot, while
// the session lives on another primary) is waited out. A second caller
// of the same room with more time than the first is not failed by the
// first one's end either: its deadline, its TTL without one, or its leaving.
func TestAnAcquireRetriesAsLongAsItsCtxLasts(t *testing.T) {
	tests := []struct {
		name      string
		first     func() (context.Context, context.CancelFunc)
		wantFirst error
	}{
		{"the first caller's deadline is half a TTL", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), testConfig().TTL/2)
		}, context.DeadlineExceeded},
		{"the first caller has no deadline", func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, context.DeadlineExceeded},
		{"the first caller leaves", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var failUntil atomic.Int64 // unix nanoseconds
			c := standalone(t).client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				if isScript(cmd, acquireScript) && time.Now().UnixNano() < failUntil.Load() {
					return fmt.Errorf("dial tcp 127.0.0.1:1: connect: %w", syscall.ECONNREFUSED) // not sent
				}
				return next(ctx, cmd)
			}})
			cfg := testConfig()
			m := startManager(t, c, cfg)
			failUntil.Store(time.Now().Add(3 * cfg.TTL / 2).UnixNano())

			first, cancel := tt.first()
			defer cancel()
			firstErr := make(chan error, 1)
			go func() {
				_, err := m.Acquire(first, "room")
				firstErr <- err
			}()
			waitFor(t, "the first caller's acquisition", func() bool {
				m.mu.Lock()
				defer m.mu.Unlock()
				return m.flights["room"] != nil
			})
			ctx, cancel := context.WithTimeout(context.Background(), 5*cfg.TTL)
			defer cancel()
			l, err := m.Acquire(ctx, "room")
			require.NoError(t, err, "Acquire with 5 TTLs of ctx, the room's calls refused for 1.5")
			assert.NotNil(t, l)
			assert.ErrorIs(t, <-firstErr, tt.wantFirst, "the first caller")
		})
	}
}

// A caller without a deadline that joined another's acquisition, which
// ran out of time after this caller's own TTL had passed, starts no
// second one: it returns with the first caller (a review found it going
// on for another TTL).
func TestAJoinerWithoutADeadlineStartsNoFlightPastItsTTL(t *testing.T) {
	var refuseStartUntil atomic.Int64 // unix nanoseconds
	c := standalone(t).client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if isScript(cmd, acquireScript) || isScript(cmd, sessionScript) && time.Now().UnixNano() < refuseStartUntil.Load() {
			return fmt.Errorf("dial tcp 127.0.0.1:1: connect: %w", syscall.ECONNREFUSED) // not sent
		}
		return next(ctx, cmd)
	}})
	cfg := testConfig()
	m := startManager(t, c, cfg)
	// The session lost, and not started again for 0.8 TTL: the flight
	// waits for it, then retries the refused acquire script for a TTL.
	refuseStartUntil.Store(time.Now().Add(cfg.TTL * 8 / 10).UnixNano())
	m.loseSession(m.lastEpoch.Load(), lostError("a test's"))

	first, cancel := context.WithCancel(context.Background()) // no deadline
	defer cancel()
	firstDone := make(chan time.Time, 1)
	go func() {
		_, err := m.Acquire(first, "room")
		assert.ErrorIs(t, err, context.DeadlineExceeded, "the first caller")
		firstDone <- time.Now()
	}()
	waitFor(t, "the first caller's acquisition", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.flights["room"] != nil
	})
	_, err := m.Acquire(context.Background(), "room")
	returned := time.Now()
	require.ErrorIs(t, err, context.DeadlineExceeded, "the joiner")
	assert.Less(t, returned.Sub(<-firstDone), cfg.TTL/2, "the joiner's return after the first caller's")
}
