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
