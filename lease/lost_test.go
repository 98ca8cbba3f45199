package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/testlog"
)

// TestLostBeforeExpiry stops session renewals reaching Redis (dropped at
// once, or delayed until the call's deadline) and checks that the holder
// is told while Redis still holds the session: the context first, then
// OnLost, which reads the session still alive with its epoch.
func TestLostBeforeExpiry(t *testing.T) {
	tests := []struct {
		name  string
		block func(ctx context.Context) error
	}{
		{"dropped", func(context.Context) error { return errors.New("renewal dropped") }},
		{"delayed", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }},
	}
	b := standalone(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var blocking atomic.Bool
			hook := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				if blocking.Load() && isScript(cmd, sessionRenewScript) {
					return tt.block(ctx)
				}
				return next(ctx, cmd)
			}}
			c := b.client(hook)
			type seen struct {
				ctxDone, lostClosed bool
				sessionTTL          time.Duration // the session's PTTL in Redis as the holder is told
				epoch               string        // the session's epoch in Redis then
			}
			called := make(chan seen, 1)
			cfg := testConfig()
			cfg.TTL = 3 * time.Second // a third of it, 1 s, for OnLost's own read of Redis
			cfg.OnLost = func(l *Lease, cause error) {
				ctx := context.Background()
				called <- seen{ctxDone: l.Context().Err() != nil, lostClosed: isLost(l),
					sessionTTL: c.PTTL(ctx, l.m.nodeKey()).Val(), epoch: c.HGet(ctx, l.m.nodeKey(), "epoch").Val()}
			}
			m := startManager(t, c, cfg)
			ctx := context.Background()
			l, err := m.Acquire(ctx, "lost-"+tt.name)
			require.NoError(t, err, "Acquire")
			blocking.Store(true)

			select {
			case <-l.Context().Done():
			case <-time.After(cfg.TTL * 2):
				require.FailNowf(t, "lease context still open", "%s after renewals stopped; want cancelled within TTL·2/3", cfg.TTL*2)
			}
			require.True(t, isLost(l), "lease ended with cause %v; want lost", context.Cause(l.Context()))
			got := <-called
			assert.True(t, got.ctxDone && got.lostClosed, "in OnLost: got %+v; want the context done and the lease lost", got)
			assert.Positive(t, got.sessionTTL, "session PTTL in OnLost: the holder must stop before Redis expires the session")
			assert.Equal(t, strconv.FormatInt(l.epoch, 10), got.epoch, "session epoch in OnLost: want the lease's, still alive")
			require.ErrorIs(t, context.Cause(l.Context()), ErrLost, "cause")
		})
	}
}

// TestSessionDeadline pins the loss rule on an injected clock: the
// session, and every lease under it, is held until TTL·2/3 after its last
// confirmed renewal was sent, and a lease of another epoch never is.
func TestSessionDeadline(t *testing.T) {
	m := unstartedManager(t)
	base := time.Unix(1000, 0)
	s := &session{epoch: 7, prefix: m.cfg.Node + "|7|"}
	m.sess.Store(s)
	m.okAt.Store(&base)
	tests := []struct {
		give time.Duration // time since the last confirmed renewal was sent
		want bool
	}{
		{0, true},
		{m.lostAfter - time.Nanosecond, true},
		{m.lostAfter, false},
		{m.lostAfter + time.Hour, false},
	}
	for _, tt := range tests {
		now := base.Add(tt.give)
		m.now = func() time.Time { return now }
		assert.Equal(t, tt.want, m.alive(7, now), "session alive %s after its renewal", tt.give)
		assert.Equal(t, tt.want, m.newLease("r", 1, s).held(), "lease held %s after its session's renewal", tt.give)
		assert.False(t, m.alive(6, now), "an earlier epoch alive %s after the renewal", tt.give)
	}
	assert.Equal(t, base.Add(m.lostAfter), m.deadline(), "deadline")
	assert.Equal(t, m.cfg.TTL*2/3, m.lostAfter, "lostAfter")
}

// TestSessionDeadlineKeepsTheMonotonicClock: the deadline, after the start
// and after a renewal, carries time.Now's monotonic reading, so a step of the wall clock back (NTP) cannot let
// the node trust a session that Redis has expired.
func TestSessionDeadlineKeepsTheMonotonicClock(t *testing.T) {
	cfg := testConfig()
	cfg.TTL = time.Minute // the test drives the renewal
	m := startManager(t, standalone(t).client(), cfg)
	// Round(0) strips the monotonic reading, and == compares it too.
	assert.True(t, m.deadline() != m.deadline().Round(0), "deadline after the start has a monotonic reading")
	require.NoError(t, m.tick(context.Background()), "renewal")
	assert.True(t, m.deadline() != m.deadline().Round(0), "deadline after a renewal has a monotonic reading")
}

// TestARedisOutageIsOneWarningNotOnePerTick: while Redis is unreachable
// the renewer tries a new session every tick; the outage is one warning,
// naming the server, and its end one line, not a line per tick, and every
// failed try counts in room_node_heartbeat_failures_total.
func TestARedisOutageIsOneWarningNotOnePerTick(t *testing.T) {
	var down atomic.Bool
	var tries atomic.Int32
	b := standalone(t)
	c := b.client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if down.Load() && (isScript(cmd, sessionScript) || isScript(cmd, sessionRenewScript)) {
			tries.Add(1)
			return fmt.Errorf("dial tcp: %w", syscall.ECONNREFUSED)
		}
		return next(ctx, cmd)
	}})
	var logs testlog.Buffer
	cfg := testConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	m := startManager(t, c, cfg)
	before := len(logs.String()) // a loaded machine may lose a session before the outage: not this test's
	down.Store(true)
	waitFor(t, "the session lost and eight tries at a new one", func() bool {
		return m.sess.Load() == nil && tries.Load() >= 8
	})
	down.Store(false)
	// The line, not m.sess: the session is current before its start has
	// listed it in the index (a round trip) and restart has logged it.
	waitFor(t, "a new session, logged", func() bool {
		return m.sess.Load() != nil && strings.Contains(logs.String()[before:], "lease session started again")
	})

	out := logs.String()[before:]
	assert.Equal(t, 1, strings.Count(out, "lease session not started again yet"), "warnings for one outage:\n%s", out)
	assert.Contains(t, out, "redis_addr="+c.(*redis.Client).Options().Addr, "the warning names the server")
	assert.Equal(t, 1, strings.Count(out, "lease session started again"), "lines for its end:\n%s", out)
	assert.NotContains(t, out, "lease session renewed again", "a new session is not the lost one renewed")
	assert.GreaterOrEqual(t, testutil.ToFloat64(m.met.heartbeatErrors), 8.0, "room_node_heartbeat_failures_total")
}

// A renewal whose call succeeds but finds the session gone, after one that
// failed, logs the loss and not "renewed again": the session was not
// renewed (a CI log of a Sentinel failover read so, just before the loss).
func TestASessionFoundGoneIsNotRenewedAgain(t *testing.T) {
	var fail atomic.Bool
	b := standalone(t)
	c := b.client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if fail.Load() && isScript(cmd, sessionRenewScript) {
			return fmt.Errorf("dial tcp: %w", syscall.ECONNREFUSED)
		}
		return next(ctx, cmd)
	}})
	var logs testlog.Buffer
	cfg := testConfig()
	cfg.TTL = time.Minute // the test drives the renewal
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	m := startManager(t, c, cfg)
	ctx := context.Background()

	fail.Store(true)
	require.Error(t, m.tick(ctx), "a renewal refused")
	fail.Store(false)
	require.NoError(t, c.Del(ctx, m.nodeKey()).Err())
	require.ErrorIs(t, m.tick(ctx), errSessionLost, "a renewal of a session gone")
	out := logs.String()
	assert.Contains(t, out, "lease session lost", "the loss, logged")
	assert.NotContains(t, out, "lease session renewed again", "a session found gone is not renewed:\n%s", out)
}

// An Acquire whose session is lost during the acquisition and then once
// more says ErrLost, as its doc promises, also when an attempt's reply was
// lost to a timeout meanwhile (a failover of the session's primary does
// both): the flight's error matched context.DeadlineExceeded too, and
// Acquire took it for its own time running out, with ErrLost gone from the
// chain, though the caller's ctx had no deadline.
func TestAnAcquireLostTwiceAmidTimeoutsSaysLost(t *testing.T) {
	var started atomic.Pointer[Manager]
	c := standalone(t).client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		m := started.Load()
		if m == nil || !isScript(cmd, acquireScript) {
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		if s := m.sess.Load(); s != nil {
			m.loseSession(s.epoch, lostError("test: the session's primary failed"))
		}
		if err == nil {
			err = fmt.Errorf("reply lost: %w", context.DeadlineExceeded)
		}
		return err
	}})
	cfg := testConfig()
	cfg.CallTimeout = 100 * time.Millisecond
	m := startManager(t, c, cfg)
	started.Store(m)

	_, err := m.Acquire(context.Background(), "lost-twice")
	assert.ErrorIs(t, err, ErrLost, "an Acquire whose session was lost twice meanwhile")
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "the caller's ctx has no deadline")
}
