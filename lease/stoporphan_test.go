package lease

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
)

// TestStopEndsASessionWhoseStartReplyWasLost: after a loss, a session
// start whose reply was lost left a session of this process in Redis under
// an epoch it never learnt. Stop ends it all the same: a session Stop left
// would outlive it by a TTL, routers placing rooms over live sessions would
// keep choosing the stopped node, and a restart with its node id would wait.
func TestStopEndsASessionWhoseStartReplyWasLost(t *testing.T) {
	var drop atomic.Bool
	c := standalone(t).client(loseReplyOnce(&drop, func(cmd redis.Cmder) bool { return isScript(cmd, sessionScript) }))
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

// TestStopAfterRedisDiedEndsNothingAlreadyExpired: a drain that begins
// while Redis is down stops at once when a TTL has passed since the last
// session write that may have reached Redis (refused connections never
// did): the session has expired there, and retrying its end until the
// drain's deadline would hold the drain, skip its Close phase and exit 3.
// Within that TTL, Stop tries until the session would expire, no longer,
// and says why it could not end it.
func TestStopAfterRedisDiedEndsNothingAlreadyExpired(t *testing.T) {
	tests := []struct {
		name    string
		elapsed time.Duration // since the last session write, on the Manager's clock
		wantErr bool
	}{
		{"a TTL after the last write", 4 * time.Second, false},
		{"within the TTL", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := redistest.Start(t)
			var ends atomic.Int32
			c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: 1, ContextTimeoutEnabled: true})
			c.AddHook(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				if isScript(cmd, sessionEndScript) {
					ends.Add(1)
				}
				return next(ctx, cmd)
			}})
			t.Cleanup(func() { _ = c.Close() })
			cfg := testConfig()
			cfg.TTL = 3 * time.Second
			m, err := New(c, cfg)
			require.NoError(t, err)
			var offset atomic.Int64
			m.now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
			require.NoError(t, m.Start(context.Background()))
			_, err = m.Acquire(context.Background(), "outage")
			require.NoError(t, err)
			s.Kill()
			offset.Store(int64(tt.elapsed))

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			err = m.Stop(ctx)
			if !tt.wantErr {
				require.NoError(t, err, "Stop")
				assert.Zero(t, ends.Load(), "session ends sent to a session Redis has expired")
				return
			}
			require.Error(t, err, "Stop")
			assert.ErrorContains(t, err, "at "+s.Addr+":", "the server is named")
			assert.ErrorContains(t, err, "; 1 room stays held until the session expires")
			assert.NotContains(t, err.Error(), "\n", "Stop's error, one line for a one-line log")
			assert.NoError(t, ctx.Err(), "Stop ran until the drain's deadline; want at most until the session's expiry")
		})
	}
}
