package lease

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReleasePipelines releases leases through the drain's hand-off on
// standalone and on a cluster: every lease gets its own outcome although
// releases share pipelines, one per primary.
func TestReleasePipelines(t *testing.T) {
	for _, start := range []func(*testing.T) backend{standalone, cluster} {
		b := start(t)
		t.Run(b.name, func(t *testing.T) {
			for _, n := range []int{1, 2, 600} {
				t.Run(fmt.Sprintf("release %d leases", n), func(t *testing.T) {
					testReleaseBatch(t, b, spreadIDs(fmt.Sprintf("release%d", n), n))
				})
			}
		})
	}
}

// outcome is what a test does to a lease's key before a batch runs.
type outcome int

const (
	keep   outcome = iota // left alone: the batch renews or releases it
	expire                // deleted: the batch reports it gone
	steal                 // overwritten by another holder: reported stolen
)

// outcomeOf spreads the three outcomes over the leases, so that a batch
// mixes them and a status attributed to the wrong lease shows.
func outcomeOf(i, n int) outcome {
	if n < 3 {
		return outcome(i) // 1 lease: kept; 2: kept and expired
	}
	return outcome(i % 3)
}

// spreadIDs are n room ids over many slots, named prefix-i (each subtest
// its own rooms: the server is shared).
func spreadIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return ids
}

// acquireAll acquires ids and applies each one's outcome to its key.
func acquireAll(t *testing.T, m *Manager, c redis.UniversalClient, ids []string) []*Lease {
	t.Helper()
	ctx := context.Background()
	ls := make([]*Lease, len(ids))
	for i, id := range ids {
		l, err := m.Acquire(ctx, id)
		require.NoError(t, err, "Acquire %s", id)
		ls[i] = l
	}
	for i, l := range ls {
		switch outcomeOf(i, len(ls)) {
		case expire:
			c.Del(ctx, l.key)
		case steal:
			c.Set(ctx, l.key, "thief|x|"+fmt.Sprint(i+1), 0)
		}
	}
	return ls
}

// testReleaseBatch hands every lease off with a flush that succeeds: the
// hand-off releases them in batches, each with its own outcome.
func testReleaseBatch(t *testing.T, b backend, ids []string) {
	var pipelined atomic.Int32 // release calls sent in pipelines
	count := pipelineHook{fn: func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		for _, cmd := range cmds {
			if isScript(cmd, releaseScript) {
				pipelined.Add(1)
			}
		}
		return next(ctx, cmds)
	}}
	c := b.client(count)
	// What is tested is each lease's outcome, not timing: a TTL long
	// enough that a loaded machine acquiring hundreds of leases on the
	// cluster does not lose the session meanwhile.
	cfg := testConfig()
	cfg.TTL = time.Minute
	m := startManager(t, c, cfg)
	ctx := context.Background()
	ls := acquireAll(t, m, c, ids)
	hook, err := m.HandOff(func(context.Context, *Lease) error { return nil }, 8)
	require.NoError(t, err)
	_ = hook.Run(ctx) // deleted and stolen routes are lost, no hand-off error; outcomes are checked below
	if len(ids) > 2 {
		assert.Positive(t, pipelined.Load(), "release calls sent in pipelines")
	}
	for i, l := range ls {
		cause := context.Cause(l.Context())
		require.ErrorIs(t, cause, ErrReleased, "%s: cause", l.label())
		got, err := c.Get(ctx, l.key).Result()
		switch outcomeOf(i, len(ls)) {
		case keep, expire:
			require.ErrorIs(t, err, redis.Nil, "%s: key holds %q after release; want deleted", l.label(), got)
		case steal:
			require.Equal(t, "thief|x|"+fmt.Sprint(i+1), got, "%s: stolen key after release (err %v); want the thief's", l.label(), err)
		}
	}
}
