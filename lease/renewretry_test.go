package lease

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
