package lease

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestScriptsSurviveAnEmptiedScriptCache: after the server forgets the
// scripts (a restart, a failover to a replica that never loaded them), the
// session renewal and the hand-off's batched release get NOSCRIPT and send
// the calls again as EVAL, instead of losing or keeping every lease.
func TestScriptsSurviveAnEmptiedScriptCache(t *testing.T) {
	var pipedEvals atomic.Int32 // release calls sent again as EVAL in a pipeline
	c := standalone(t).client(pipelineHook{fn: func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		for _, cmd := range cmds {
			if cmd.Name() == "eval" && isScript(cmd, releaseScript) {
				pipedEvals.Add(1)
			}
		}
		return next(ctx, cmds)
	}})
	cfg := testConfig()
	cfg.TTL = time.Minute // the test drives the renewal
	m := startManager(t, c, cfg)
	ctx := context.Background()
	leases := make([]*Lease, 3)
	for i := range leases {
		l, err := m.Acquire(ctx, "noscript-"+strconv.Itoa(i))
		require.NoError(t, err, "Acquire")
		leases[i] = l
	}

	require.NoError(t, c.ScriptFlush(ctx).Err(), "SCRIPT FLUSH")
	require.NoError(t, m.tick(ctx), "renewal after SCRIPT FLUSH")
	for _, l := range leases {
		assert.True(t, l.held(), "%s held after the renewal", l.label())
	}

	require.NoError(t, c.ScriptFlush(ctx).Err(), "SCRIPT FLUSH")
	// The three flushed before the releaser reads any: one pipeline.
	flushed := make(chan *Lease, len(leases))
	for _, l := range leases {
		flushed <- l
	}
	close(flushed)
	m.releaseFlushed(ctx, flushed, func(l *Lease, err error) {
		assert.NoError(t, err, "release of %s after SCRIPT FLUSH", l.label())
	})
	for _, l := range leases {
		assert.Zero(t, c.Exists(ctx, l.key).Val(), "%s still in Redis after the batched release", l.label())
	}
	assert.EqualValues(t, 3, pipedEvals.Load(), "release calls sent again as EVAL in one pipeline")
}
