package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
)

// FuzzParseValue: a route value parses only into a non-empty node and a
// positive fence, and a value in the format this package writes
// (node|holder|fence) parses back to its node and fence.
func FuzzParseValue(f *testing.F) {
	f.Add("node-1|h|42", "node-1", "h", int64(42))
	f.Add("", "", "", int64(0))
	f.Add("|h|1", "n", "", int64(1))
	f.Add("a|b|c", "a|x", "b", int64(-1))
	f.Add("n|h|99999999999999999999", "n", "h|h", int64(9223372036854775807))
	f.Fuzz(func(t *testing.T, raw, node, holder string, fence int64) {
		if n, _, fc, ok := parseValue(raw); ok {
			assert.NotEmpty(t, n, "node parsed from %q", raw)
			assert.NotContains(t, n, "|", "node parsed from %q", raw)
			assert.Positive(t, fc, "fence parsed from %q", raw)
		}
		if node == "" || strings.Contains(node, "|") || strings.Contains(holder, "|") || fence <= 0 {
			return
		}
		v := node + "|" + holder + "|" + strconv.FormatInt(fence, 10)
		n, _, fc, ok := parseValue(v)
		require.True(t, ok, "parseValue(%q): got not ok; want ok", v)
		assert.Equal(t, node, n, "node of %q", v)
		assert.Equal(t, fence, fc, "fence of %q", v)
	})
}

// FuzzStoredValues writes what another process, an older version or a
// person with redis-cli might have left in a room's route and fence keys,
// then acquires the room. A route value with a TTL (the earlier per-room
// format), or one that does not parse, is never taken over: Acquire fails
// with ErrHeld and the value is left as it was. One without a TTL naming a
// node with no session (or this node) is dead and is taken; so is a free
// room. A taken
// room gets a fence above any counter and any route fence left (the fence
// only rises), or Acquire refuses with an error naming the fence key and
// leaves both keys as they were.
func FuzzStoredValues(f *testing.F) {
	f.Add("", "", false)
	f.Add("node-x|h|123", "", false)
	f.Add("node-x|17|123", "", true)
	f.Add("node-x|17|99999999999999999", "5", true)
	f.Add("garbage", "17", true)
	f.Add("", "not a number", false)
	f.Add("", "1e308", false)
	f.Add("", "-5", false)
	f.Add("", "9007199254740993", false)
	f.Add("n||", "0x10", false)
	// One server and Manager for every input (a server per input would be
	// most of the time spent), stopped once the inputs are done.
	s := redistest.Start(f)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: 1, ContextTimeoutEnabled: true})
	f.Cleanup(func() { _ = c.Close() })
	m, err := New(c, testConfig())
	require.NoError(f, err, "New")
	require.NoError(f, m.Start(context.Background()), "Start")
	f.Cleanup(func() { _ = m.Stop(context.Background()) })
	f.Fuzz(func(t *testing.T, route, fence string, persist bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		id := "fuzz"
		routeKey, fenceKey := m.routeKey(id), m.fenceKey(id)
		require.NoError(t, c.Del(ctx, routeKey, fenceKey).Err())
		if route != "" {
			ttl := time.Minute
			if persist {
				ttl = 0
			}
			require.NoError(t, c.Set(ctx, routeKey, route, ttl).Err())
		}
		if fence != "" {
			require.NoError(t, c.Set(ctx, fenceKey, fence, time.Minute).Err())
		}
		l, err := m.Acquire(ctx, id)
		if l != nil {
			defer l.Release(context.Background()) //nolint:errcheck // the next input deletes the keys anyway
		}
		_, _, _, parses := parseValue(route)
		// Without a TTL a parseable route is this node's (taken over) or
		// names a node with no session here: dead. Either is taken.
		dead := persist && parses
		if route != "" && !dead {
			require.ErrorIs(t, err, ErrHeld, "Acquire over route value %q", route)
			got, _ := c.Get(ctx, routeKey).Result()
			assert.Equal(t, route, got, "route value after a refused Acquire")
			if n, _, fc, ok := parseValue(route); ok {
				assert.ErrorContains(t, err, fmt.Sprintf("node %q (fence %d)", n, fc), "Acquire's error names the holder")
				o, oerr := m.Owner(ctx, id)
				require.NoError(t, oerr, "Owner of a well-formed value %q of the earlier format", route)
				assert.Equal(t, n, o.Node, "Owner's node for %q", route)
			} else {
				_, oerr := m.Owner(ctx, id)
				assert.ErrorIs(t, oerr, ErrHeld, "Owner of an unparseable value %q", route)
			}
			return
		}
		if err != nil {
			assert.False(t, errors.Is(err, ErrHeld), "got %v over no route value", err)
			assert.ErrorContains(t, err, fenceKey, "an Acquire refused over fence value %q names the key", fence)
			got, _ := c.Get(ctx, routeKey).Result()
			assert.Equal(t, route, got, "route after a refused Acquire: as it was")
			got, _ = c.Get(ctx, fenceKey).Result()
			assert.Equal(t, fence, got, "fence value after a refused Acquire")
			return
		}
		if prev, perr := strconv.ParseInt(strings.TrimSpace(fence), 10, 64); perr == nil {
			assert.Greater(t, l.Token(), prev, "fence over a counter of %q", fence)
		}
		if _, _, prev, ok := parseValue(route); ok && dead && prev < 1<<53 {
			assert.Greater(t, l.Token(), prev, "fence over the dead route %q", route)
		}
		assert.Positive(t, l.Token(), "fence over a counter of %q", fence)
	})
}
