package lease

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// isAcquire reports whether cmd runs the acquire script.
func isAcquire(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	switch cmd.Name() {
	case "evalsha":
		return args[1] == acquireScript.Hash()
	case "eval":
		return args[1] == scriptSources[acquireScript]
	}
	return false
}

// settled waits until no acquisition of m is in progress.
func settled(t *testing.T, m *Manager) {
	t.Helper()
	waitFor(t, "acquisitions in progress to settle", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.flights) == 0
	})
}

// TestStopOutOfTimeStillEndsLeases: a Stop whose ctx ends while an
// acquisition is in progress has already stopped the renewer, so it must
// still end every lease (Lost() closed, context cancelled): nothing renews
// them any more, and a holder that kept writing would outlive the TTL.
func TestStopOutOfTimeStillEndsLeases(t *testing.T) {
	b := standalone(t)
	gate := make(chan struct{})
	var armed = make(chan struct{}, 1)
	hook := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if isAcquire(cmd) {
			select {
			case <-armed:
				<-gate // an acquisition that takes longer than Stop's budget
			default:
			}
		}
		return next(ctx, cmd)
	}}
	c := b.client(hook)
	cfg := testConfig()
	cfg.TTL = 6 * time.Second // the held attempt must not time out by itself
	m := startManager(t, c, cfg)
	ctx := context.Background()
	held, err := m.Acquire(ctx, "held")
	require.NoError(t, err, "Acquire")
	armed <- struct{}{}
	slowCtx, cancelSlow := context.WithCancel(ctx)
	defer cancelSlow()
	slow := make(chan error, 1)
	go func() { _, err := m.Acquire(slowCtx, "slow"); slow <- err }()
	waitFor(t, "the slow acquisition to start", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.flights) == 1 && len(armed) == 0
	})

	stopCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, m.Stop(stopCtx), context.DeadlineExceeded, "Stop out of time")
	assert.ErrorIs(t, context.Cause(held.Context()), ErrReleased, "held lease: cause (ended with the session)")
	assert.Empty(t, m.snapshot(), "Held() after Stop")
	close(gate)
	cancelSlow()
	<-slow
	settled(t, m)
}

// TestStopWithAnEndedContextStillEndsTheSession: a Stop whose ctx has
// ended, or is too close to its end for a call (a drain out of time),
// still ends the session, in one attempt of CallTimeout: the node's rooms
// move now, not when the session expires.
func TestStopWithAnEndedContextStillEndsTheSession(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"ended", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}},
		{"nearly ended", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := standalone(t).client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				if d, ok := ctx.Deadline(); ok && isScript(cmd, sessionEndScript) && time.Until(d) < time.Second {
					<-ctx.Done() // a call this short cannot reach a slow Redis in time
					return ctx.Err()
				}
				return next(ctx, cmd)
			}})
			cfg := testConfig()
			cfg.TTL = time.Minute // expiry would free the room only after the test; CallTimeout is 10 s
			m := startManager(t, c, cfg)
			ctx := context.Background()
			_, err := m.Acquire(ctx, "moves")
			require.NoError(t, err, "Acquire")
			stopCtx, cancel := tc.ctx()
			defer cancel()
			err = m.Stop(stopCtx) // may report ctx's error from waiting for the renewer; not that rooms stay held
			if err != nil {
				assert.NotContains(t, err.Error(), "stay held", "Stop's error")
			}
			assert.Zero(t, c.Exists(ctx, m.nodeKey()).Val(), "the session in Redis after Stop")
		})
	}
}

// Stop says, once, what the session's end frees: how many rooms it
// released and whether a hand-off flushed them first. A service that
// forgot the HandOff hook otherwise lost its rooms' state without a line.
func TestStopSaysWhatTheSessionsEndFrees(t *testing.T) {
	b := standalone(t)
	var logs logBuffer
	cfg := testConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	m := startManager(t, b.client(), cfg)
	for _, id := range []string{"a", "b"} {
		_, err := m.Acquire(context.Background(), id)
		require.NoError(t, err)
	}
	require.NoError(t, m.Stop(context.Background()))
	require.NoError(t, m.Stop(context.Background()), "again")
	assert.Equal(t, 1, strings.Count(logs.String(), "lease manager stopping"), logs.String())
	assert.Contains(t, logs.String(), "still_held=2 hand_off=false")
}

// A Stop after one that ended the session sends nothing: a service without
// fx calls Stop once Run has returned, for a forced drain, which skips the
// Release hook, and after a clean drain its client is closed by then.
func TestStopAfterTheSessionEndedSendsNothing(t *testing.T) {
	b := standalone(t)
	c := b.client()
	m := startManager(t, c, testConfig())
	_, err := m.Acquire(context.Background(), "a")
	require.NoError(t, err)
	require.NoError(t, m.Stop(context.Background()), "the Release hook's Stop")
	require.NoError(t, c.Close(), "phase Close")
	assert.NoError(t, m.Stop(context.Background()), "Stop after Run returned")
}

// A Stop concurrent with the one that stopped the renewer (the Release
// hook's Abort starts one, then fxlease's OnStop calls another) waits for
// the renewer too: the second returned at once, ending the session while a
// renewal was still in flight and leaving the renewer running after a Stop
// that returned nil.
func TestASecondStopWaitsForTheRenewer(t *testing.T) {
	var started atomic.Pointer[Manager]
	inRenewal := make(chan struct{}, 1)
	c := standalone(t).client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if started.Load() != nil && isScript(cmd, sessionRenewScript) {
			select {
			case inRenewal <- struct{}{}:
			default:
			}
			<-ctx.Done() // a renewal Redis does not answer within its CallTimeout
			return ctx.Err()
		}
		return next(ctx, cmd)
	}})
	cfg := testConfig()
	cfg.TTL = 6 * time.Second // CallTimeout 1 s: the renewal hangs that long
	m := startManager(t, c, cfg)
	started.Store(m)
	<-inRenewal
	m.mu.Lock()
	renewerDone := m.done
	m.mu.Unlock()

	first := make(chan error, 1)
	go func() { first <- m.Stop(context.Background()) }()
	waitFor(t, "the first Stop to take the renewer", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.stopped
	})
	require.NoError(t, m.Stop(context.Background()), "second Stop")
	select {
	case <-renewerDone:
	default:
		t.Error("the renewer still runs after a Stop returned")
	}
	require.NoError(t, <-first)
}

// When the session's end fails, Stop's error counts every room whose route
// stays until the session expires, each once: the hand-off's rooms left to
// expire too, which it had counted as none ("0 rooms stay held" after a
// hand-off that left three), and a room whose flush Stop cut short, which
// both Stop and the hand-off end (it counted 6 of 3).
func TestStopsErrorCountsTheRoomsStillHeld(t *testing.T) {
	tests := []struct {
		name       string
		cutShort   bool  // Stop comes while the flushes run, not after the hand-off
		endRefusal error // the session's end's answer
	}{
		{"after a hand-off that left every room", false, errors.New("ERR injected: session end refused")},
		{"during the flushes", true, syscall.ECONNREFUSED}, // retried until its budget: the flushes have returned by then
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := standalone(t)
			c := b.client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				if isScript(cmd, sessionEndScript) {
					return tt.endRefusal
				}
				return next(ctx, cmd)
			}})
			m := startManager(t, c, testConfig())
			ctx := context.Background()
			flushing := make(chan struct{}, 3)
			h, err := m.HandOff(func(ctx context.Context, _ *Lease) error {
				if !tt.cutShort {
					return errors.New("flush failed")
				}
				flushing <- struct{}{}
				<-ctx.Done()
				return ctx.Err()
			}, 3)
			require.NoError(t, err)
			for _, id := range []string{"a", "b", "c"} {
				_, err := m.Acquire(ctx, id)
				require.NoError(t, err)
			}
			m.BeginDrain()
			handedOff := make(chan error, 1)
			go func() { handedOff <- h.Run(ctx) }()
			if tt.cutShort {
				for range 3 {
					<-flushing
				}
			} else {
				require.Error(t, <-handedOff, "a hand-off whose every flush failed")
			}
			assert.ErrorContains(t, m.ReleaseHook().Run(ctx), "3 rooms stay held until the session expires")
			if tt.cutShort {
				require.Error(t, <-handedOff, "a hand-off cut short")
			}
		})
	}
}
