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
// any before.
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			id := "hand-" + tt.name
			key := m.routeKey(id)
			const ttl = 300 * time.Millisecond
			out, err := exec.Command("redis-cli", "-p", strconv.Itoa(s.Port), "SET", key, tt.give,
				"PX", strconv.FormatInt(ttl.Milliseconds(), 10)).CombinedOutput()
			require.NoError(t, err, "redis-cli SET: %s", out)
			for {
				pttl := c.PTTL(ctx, key).Val()
				l, err := m.Acquire(ctx, id)
				if l != nil {
					// Taken: the hand-written key must have expired first.
					assert.LessOrEqual(t, pttl, time.Duration(0), "acquired %s while its hand-written value had %s to live", key, pttl)
					assert.Greater(t, l.Token(), int64(123), "fence after the hand-written value")
					require.NoError(t, l.Release(ctx), "Release")
					return
				}
				require.ErrorIs(t, err, ErrHeld, "Acquire over %q", tt.give)
				if pttl > 0 {
					assert.Equal(t, tt.give, c.Get(ctx, key).Val(), "the hand-written value after a refused Acquire")
				}
				time.Sleep(20 * time.Millisecond) // waiting for Redis to expire the key: an external process, polled
			}
		})
	}
}
