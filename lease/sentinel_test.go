package lease

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
)

// A planned Sentinel failover (SENTINEL FAILOVER) at the TTL docs/leases.md
// advises for Sentinel, 3 s, costs no session and no lease: Sentinel
// names the new primary about a second after promoting it, and the
// session, last renewed on the old primary before the promotion, outlives
// that on the new one. The renewals then go to the new primary, where the
// session keeps its epoch, and Place names the nodes it named before.
func TestSentinelFailoverAtTheAdvisedTTLKeepsEveryLease(t *testing.T) {
	sen := redistest.StartSentinel(t)
	ctx := context.Background()
	cfg := testConfig()
	cfg.TTL = 3 * time.Second
	var lost atomic.Int32
	cfg.OnLost = func(*Lease, error) { lost.Add(1) }
	m := startManager(t, sen.Client(), cfg)
	otherCfg := testConfig()
	otherCfg.TTL = cfg.TTL
	other := startManager(t, sen.Client(), otherCfg)
	placed := placements(t, m, other)
	var leases []*Lease
	for i := range 20 {
		l, err := m.Acquire(ctx, "room-"+strconv.Itoa(i))
		require.NoError(t, err)
		leases = append(leases, l)
	}
	epoch := m.lastEpoch.Load()

	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	promoted := sen.Failover(fctx)
	// A whole TTL of renewals confirmed after the switch: the session, had
	// it expired on the new primary, would have been found gone by now.
	after := testutil.ToFloat64(m.met.renewed)
	perTTL := float64(cfg.TTL / m.cfg.RenewInterval)
	waitFor(t, "a TTL of renewals after the failover", func() bool { return testutil.ToFloat64(m.met.renewed) >= after+perTTL })

	assert.Zero(t, lost.Load(), "leases lost")
	assert.Equal(t, epoch, m.lastEpoch.Load(), "the session's epoch")
	got, err := promoted.Client().HGet(ctx, m.nodeKey(), "epoch").Result()
	require.NoError(t, err, "the session on the new primary")
	assert.Equal(t, strconv.FormatInt(epoch, 10), got, "the session's epoch on the new primary")
	for _, l := range leases {
		assert.NoError(t, l.Context().Err(), "lease %s", l.ID())
	}
	assert.Equal(t, placed, placements(t, m, other), "rooms placed after the failover; want as before: the index moved with the data")
}

// TestSentinelPrimaryFailure kills or pauses the primary of a Sentinel
// setup under a Manager holding rooms, at the TTL docs/leases.md advises
// for Sentinel. The sentinel finds the primary down after its
// down-after-milliseconds (1 s here) and promotes the replica; the
// Manager follows it there: within a second of the sentinel naming the
// new primary it takes rooms again, and every lease it held is either
// still held or was lost with ErrLost, its room taken again with a higher
// fence. A paused primary (a hung host) answers nothing where a killed one
// refuses connections: every call to it ends at its deadline instead.
func TestSentinelPrimaryFailure(t *testing.T) {
	for _, tt := range []struct {
		name   string
		paused bool
	}{{"killed", false}, {"paused", true}} {
		t.Run(tt.name, func(t *testing.T) {
			sen := redistest.StartSentinel(t)
			ctx := context.Background()
			cfg := testConfig()
			cfg.TTL = 3 * time.Second
			m := startManager(t, sen.Client(), cfg)
			fences := map[string]int64{}
			var leases []*Lease
			for i := range 20 {
				l, err := m.Acquire(ctx, "room-"+strconv.Itoa(i))
				require.NoError(t, err)
				leases = append(leases, l)
				fences[l.ID()] = l.Token()
			}

			fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			failover := sen.FailoverKilled
			if tt.paused {
				failover = sen.FailoverPaused
			}
			promoted := failover(fctx)
			// One Acquire, its deadline a second after the sentinel named the
			// new primary: it waits for the session to start there.
			named := time.Now()
			actx, cancel := context.WithDeadline(ctx, named.Add(time.Second))
			_, err := m.Acquire(actx, "after-failover")
			cancel()
			require.NoError(t, err, "a room within a second of the sentinel naming the new primary")
			t.Logf("a room taken %s after the sentinel named the new primary", time.Since(named).Round(time.Millisecond))
			epoch, err := promoted.Client().HGet(ctx, m.nodeKey(), "epoch").Result()
			require.NoError(t, err, "the session on the new primary")
			assert.Equal(t, strconv.FormatInt(m.lastEpoch.Load(), 10), epoch, "the session's epoch on the new primary")
			for _, l := range leases {
				if l.Context().Err() != nil {
					assert.ErrorIs(t, context.Cause(l.Context()), ErrLost, "how lease %s ended", l.ID())
				}
				again, err := m.Acquire(ctx, l.ID())
				require.NoError(t, err, "room %s after the failover", l.ID())
				assert.GreaterOrEqual(t, again.Token(), fences[l.ID()], "room %s's fence after the failover", l.ID())
				if again != l {
					assert.Greater(t, again.Token(), fences[l.ID()], "room %s's fence, taken again", l.ID())
				}
			}
		})
	}
}
