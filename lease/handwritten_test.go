package lease

import (
	"context"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
)

// TestHandWrittenRouteValue: a route value written by hand with redis-cli,
// garbage or another node's well-formed lease, is never taken over while
// its key lives; once it expires, the room is acquired with a fence above
// any before. The key lives until the test expires it: an Acquire racing
// a key about to expire on its own could not tell which came first.
func TestHandWrittenRouteValue(t *testing.T) {
	tests := []struct {
		name, give string
	}{
		{"garbage", "not|a lease at all"},
		{"empty", ""},
		{"another-nodes-lease", "node-x|3f2a|123"},
	}
	s := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	m := startManager(t, c, testConfig())
	cli := func(t *testing.T, args ...string) {
		t.Helper()
		out, err := exec.Command("redis-cli", append([]string{"-p", strconv.Itoa(s.Port)}, args...)...).CombinedOutput()
		require.NoError(t, err, "redis-cli %v: %s", args, out)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			id := "hand-" + tt.name
			key := m.routeKey(id)
			cli(t, "SET", key, tt.give, "PX", strconv.FormatInt(time.Hour.Milliseconds(), 10))
			for range 3 {
				l, err := m.Acquire(ctx, id)
				require.ErrorIs(t, err, ErrHeld, "Acquire over %q while it lives: got lease %v", tt.give, l)
				assert.Equal(t, tt.give, c.Get(ctx, key).Val(), "the hand-written value after a refused Acquire")
			}
			cli(t, "PEXPIRE", key, "1")
			waitFor(t, "Redis to expire "+key, func() bool { return c.Exists(ctx, key).Val() == 0 })
			l, err := m.Acquire(ctx, id)
			require.NoError(t, err, "Acquire once the hand-written value expired")
			assert.Greater(t, l.Token(), int64(123), "fence after the hand-written value")
			require.NoError(t, l.Release(ctx), "Release")
		})
	}
}
