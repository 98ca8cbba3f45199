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

// TestStopEndsASessionWhoseStartReplyWasLost: after a loss, a session
// start whose reply was lost left a session of this process in Redis under
// an epoch it never learnt. Stop ends it all the same: a session Stop left
// would outlive it by a TTL, routers placing rooms over live sessions would
// keep choosing the stopped node, and a restart with its node id would wait.
func TestStopEndsASessionWhoseStartReplyWasLost(t *testing.T) {
	var drop atomic.Bool
	c := standalone(t).client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		err := next(ctx, cmd)
		if err == nil && isScript(cmd, sessionScript) && drop.CompareAndSwap(true, false) {
			return fmt.Errorf("reply lost: %w", context.DeadlineExceeded)
		}
		return err
	}})
	cfg := testConfig()
	cfg.TTL = time.Minute // the renewer's next tick is 10 s away
	m := startManager(t, c, cfg)
	ctx := context.Background()
	m.loseSession(m.sess.Load().epoch, lostError("test"))
	drop.Store(true)
	require.Error(t, m.startSession(ctx), "start whose reply was lost")
	require.EqualValues(t, 1, c.Exists(ctx, m.nodeKey()).Val(), "the start reached Redis")
	require.NoError(t, m.Stop(ctx))
	assert.Zero(t, c.Exists(ctx, m.nodeKey()).Val(), "this process's session in Redis after Stop (PTTL %s)", c.PTTL(ctx, m.nodeKey()).Val())
}
