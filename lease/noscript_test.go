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

// TestBatchesSurviveAnEmptiedScriptCache: after the server forgets the
// scripts (a restart, a failover to a replica that never loaded them), the
// renewal round and the batched release get NOSCRIPT and send the calls
// again as EVAL, instead of failing every lease.
func TestBatchesSurviveAnEmptiedScriptCache(t *testing.T) {
	var evals atomic.Int32 // batch scripts sent as EVAL
	c := standalone(t).client(pipelineHook{fn: func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		for _, cmd := range cmds {
			if args := cmd.Args(); cmd.Name() == "eval" && (args[1] == renewSrc || args[1] == releaseSrc) {
				evals.Add(1)
			}
		}
		return next(ctx, cmds)
	}})
	cfg := testConfig()
	cfg.TTL = 6 * time.Second // the renewer's own tick rarely lands inside the test
	m := startManager(t, c, cfg)
	ctx := context.Background()
	leases := make([]*Lease, 3)
	for i := range leases {
		l, err := m.Acquire(ctx, "noscript-"+strconv.Itoa(i))
		require.NoError(t, err, "Acquire")
		leases[i] = l
	}

	require.NoError(t, c.ScriptFlush(ctx).Err(), "SCRIPT FLUSH")
	require.NoError(t, m.Renew(ctx), "Renew after SCRIPT FLUSH")
	assert.Equal(t, 3, m.Held(), "leases held after the renewal")

	require.NoError(t, c.ScriptFlush(ctx).Err(), "SCRIPT FLUSH")
	require.NoError(t, m.ReleaseHook().Run(ctx), "Release hook after SCRIPT FLUSH")
	for _, l := range leases {
		assert.Zero(t, c.Exists(ctx, l.key).Val(), "%s still in Redis after the Release hook", l.label())
	}
	assert.GreaterOrEqual(t, evals.Load(), int32(2), "batch scripts sent again as EVAL; want one renewal and one release at least")
}
