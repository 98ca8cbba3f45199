package lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fencedWrite is storage that remembers the highest token it has seen and
// refuses lower ones, as [Lease.Token]'s doc asks of storage.
var fencedWrite = redis.NewScript(`
local top = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < top then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1`)

// TestAcquireEndsOverdueLease re-acquires a room whose session is overdue
// while the renewer has not yet noticed (it is starved of CPU, say): the
// old lease must end, lost, before the new one is handed out under a new
// session, so its holder can no longer write with the old token. The
// session is lost as a whole, as the renewer would lose it: every other
// lease under it ends too.
func TestAcquireEndsOverdueLease(t *testing.T) {
	b := standalone(t)
	c := b.client()
	cfg := testConfig()
	// The renewer's first wake is a minute away: nothing but Acquire can
	// end the old lease within this test.
	cfg.TTL, cfg.RenewInterval = 3*time.Minute, 50*time.Second
	m := startManager(t, c, cfg)
	ctx := context.Background()
	old, err := m.Acquire(ctx, "overdue")
	require.NoError(t, err, "Acquire")
	// write is what a holder does: write only while its lease's context
	// is live, with the lease's token.
	write := func(l *Lease) bool {
		if l.Context().Err() != nil {
			return false
		}
		ok, err := fencedWrite.Run(ctx, c, []string{"store:{overdue}"}, l.Token()).Int()
		require.NoError(t, err, "fenced write")
		return ok == 1
	}
	require.True(t, write(old), "write with the fresh lease refused; want accepted")
	other, err := m.Acquire(ctx, "overdue-other")
	require.NoError(t, err, "Acquire of another room")
	m.okAt.Store(new(time.Now().Add(-m.lostAfter))) // session renewals failing for TTL·2/3

	cur, err := m.Acquire(ctx, "overdue")
	require.NoError(t, err, "Acquire of the overdue room")
	require.NotSame(t, old, cur, "re-acquired lease: want a new lease")
	require.Greater(t, cur.Token(), old.Token(), "re-acquired lease: token")
	assert.False(t, write(old), "old holder wrote with token after the room was re-acquired; want refused")
	assert.True(t, isLost(old), "old lease: not lost after the room was re-acquired; want lost")
	assert.ErrorIs(t, context.Cause(old.Context()), ErrLost, "old lease: cause")
	assert.ErrorIs(t, context.Cause(other.Context()), ErrLost, "the other room's lease under the overdue session: cause")
	assert.True(t, write(cur), "write with the new lease refused; want accepted")
	assert.False(t, write(old), "old holder wrote after the new holder; want refused")
	if held := m.snapshot(); assert.Len(t, held, 1, "Held(): want only %v", cur) {
		assert.Same(t, cur, held[0], "Held(): want only the new lease")
	}
}

// A lease given up because no renewal was confirmed says how long it has
// been since the last confirmed one, with the limit beside it: the limit
// alone (TTL·2/3) read as if that much time had passed.
func TestOverdueLeaseSaysTheTimeSinceItsLastRenewal(t *testing.T) {
	b := standalone(t)
	cfg := testConfig()
	cfg.TTL, cfg.RenewInterval = 3*time.Minute, 50*time.Second // the renewer stays asleep in this test
	var logs bytes.Buffer
	cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	m, err := New(b.client(), cfg)
	require.NoError(t, err, "New")
	// The Manager's clock, fixed from a moment on so the figure is exact.
	var fixed atomic.Int64
	m.now = func() time.Time {
		if n := fixed.Load(); n != 0 {
			return time.Unix(0, n)
		}
		return time.Now()
	}
	ctx := context.Background()
	require.NoError(t, m.Start(ctx), "Start")
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	old, err := m.Acquire(ctx, "late")
	require.NoError(t, err, "Acquire")
	// Renewals failing for 5m15s, well past the 2m limit.
	now := time.Now()
	fixed.Store(now.UnixNano())
	m.okAt.Store(new(now.Add(-5*time.Minute - 15*time.Second)))
	_, err = m.Acquire(ctx, "late")
	require.NoError(t, err, "Acquire of the overdue room")
	const want = "no session renewal confirmed for 5m15s (limit 2m0s, TTL·2/3)"
	assert.ErrorContains(t, context.Cause(old.Context()), want, "old lease: cause")
	assert.Contains(t, logs.String(), want, "log: want a lease lost line")
}

// An Acquire that finds its session overdue starts a new one, and a start
// attempt that times out is retried within the Acquire's ctx, as every
// lease call is (docs/leases.md, Budgets): one slow call does not fail it.
func TestAcquireRetriesTheStartOfASessionAfterAnOverdueOne(t *testing.T) {
	var failNext atomic.Bool
	c := standalone(t).client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if isScript(cmd, sessionScript) && failNext.CompareAndSwap(true, false) {
			return fmt.Errorf("slow server: %w", context.DeadlineExceeded) // not sent: nothing applied
		}
		return next(ctx, cmd)
	}})
	cfg := testConfig()
	cfg.TTL, cfg.RenewInterval = 3*time.Minute, 50*time.Second // the renewer stays asleep in this test
	m := startManager(t, c, cfg)
	ctx := context.Background()
	old, err := m.Acquire(ctx, "slow-start")
	require.NoError(t, err, "Acquire")
	m.okAt.Store(new(time.Now().Add(-m.lostAfter))) // session renewals failing for TTL·2/3
	startErr := errors.New("a start of the renewer's that failed")
	m.startErr.Store(&startErr)
	failNext.Store(true)

	cur, err := m.Acquire(ctx, "slow-start")
	require.NoError(t, err, "Acquire after an overdue session, its first start attempt timing out")
	assert.False(t, failNext.Load(), "the failing start attempt ran")
	assert.Greater(t, cur.epoch, old.epoch, "the new lease's session")
	// Started by the Acquire, not the renewer: the next failed start is logged.
	assert.Nil(t, m.startErr.Load(), "the last failed start, once a session started")
}

// Stop keeps to its ctx while an acquisition's start of the node's next
// session hangs, whether the acquisition's caller gave up first (the start
// then had at most its caller's time) or still waits (the start has a
// whole CallTimeout, and Stop, which waits for it, must still keep to its
// own ctx). Reviews found Stop waiting a CallTimeout in both.
func TestStopKeepsToItsCtxWhileAnAcquisitionsStartHangs(t *testing.T) {
	tests := []struct {
		name   string
		caller time.Duration // the Acquire's ctx
	}{
		{"its caller gave up", 10 * time.Millisecond},
		{"its caller waits", 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hang atomic.Bool
			hung := make(chan struct{}, 1)
			c := standalone(t).client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				if isScript(cmd, sessionScript) && hang.Load() {
					select {
					case hung <- struct{}{}:
					default:
					}
					<-ctx.Done() // a hung server
					return ctx.Err()
				}
				return next(ctx, cmd)
			}})
			cfg := testConfig()
			cfg.TTL, cfg.RenewInterval, cfg.CallTimeout = 3*time.Minute, 50*time.Second, 10*time.Second // the renewer stays asleep
			m := startManager(t, c, cfg)
			m.okAt.Store(new(time.Now().Add(-m.lostAfter))) // session renewals failing for TTL·2/3
			hang.Store(true)
			acquired := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), tt.caller)
				defer cancel()
				_, err := m.Acquire(ctx, "room")
				acquired <- err
			}()
			<-hung // the acquisition's start of the next session has been sent
			gaveUp := tt.caller < time.Second
			if gaveUp {
				require.ErrorIs(t, <-acquired, context.DeadlineExceeded, "Acquire with %s", tt.caller)
			}

			sctx, scancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer scancel()
			start := time.Now()
			_ = m.Stop(sctx)
			assert.Less(t, time.Since(start), 3*time.Second, "Stop with a 100 ms ctx, while a start of CallTimeout %s hangs", cfg.CallTimeout)
			if !gaveUp {
				assert.ErrorIs(t, <-acquired, ErrNotRunning, "the Acquire cut short by Stop")
			}
		})
	}
}
