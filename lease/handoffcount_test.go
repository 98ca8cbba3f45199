package lease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAFlushedLeaseWhoseReleaseFailedIsLeftToExpire: a flushed lease whose
// release failed has left the lease set, and its room is freed by the
// session's end, as a lease left to expire is: it is counted so, and the
// counters add up to the leases acquired.
func TestAFlushedLeaseWhoseReleaseFailedIsLeftToExpire(t *testing.T) {
	var failRelease atomic.Bool
	c := standalone(t).client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if failRelease.Load() && isScript(cmd, releaseScript) {
			return errors.New("ERR injected: release refused")
		}
		return next(ctx, cmd)
	}})
	m := startManager(t, c, testConfig())
	ctx := context.Background()
	_, err := m.Acquire(ctx, "flushed")
	require.NoError(t, err)
	hook, err := m.HandOff(func(context.Context, *Lease) error { return nil }, 1)
	require.NoError(t, err)
	failRelease.Store(true)
	m.BeginDrain()
	err = hook.Run(ctx)
	assert.ErrorContains(t, err, "0 released, 1 left to expire, 0 lost", "hand-off: the release failed")
	assert.ErrorContains(t, err, "room flushed: release: ERR injected", "hand-off")
	require.NoError(t, m.Stop(ctx), "Stop: the session's end frees the room")
	met := m.met
	sum := testutil.ToFloat64(met.released) + testutil.ToFloat64(met.lost) + testutil.ToFloat64(met.leftToExpire)
	assert.Equal(t, 1.0, testutil.ToFloat64(met.leftToExpire), "room_lease_left_to_expire_total")
	assert.Equal(t, testutil.ToFloat64(met.acquired), sum,
		"acquired vs released %v + lost %v + left to expire %v", testutil.ToFloat64(met.released),
		testutil.ToFloat64(met.lost), testutil.ToFloat64(met.leftToExpire))
}
