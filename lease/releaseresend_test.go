package lease

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
)

// resetAfterApply is a connection whose reply to the next release script
// is lost after the server applied it (the connection resets): go-redis
// sends the command again on a new connection (MaxRetries 1).
type resetAfterApply struct {
	net.Conn
	arm, armed *atomic.Bool
}

func (c *resetAfterApply) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(releaseScript.Hash())) && c.arm.CompareAndSwap(true, false) {
		c.armed.Store(true)
	}
	return c.Conn.Write(p)
}

func (c *resetAfterApply) Read(p []byte) (int, error) {
	if c.armed.CompareAndSwap(true, false) {
		_, _ = c.Conn.Read(p) // the reply: the server applied the release
		_ = c.Conn.Close()
		return 0, io.EOF
	}
	return c.Conn.Read(p)
}

// TestAReleaseResentByGoRedisIsReleased: a release whose reply is lost to
// a connection reset is resent by go-redis itself (MaxRetries 1, as New
// allows), below the Manager's retry, and the resend finds the route
// gone: the release is done, and counted, not reported as ErrNotHeld.
func TestAReleaseResentByGoRedisIsReleased(t *testing.T) {
	s := redistest.Start(t)
	var arm atomic.Bool
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: 1, ContextTimeoutEnabled: true,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &resetAfterApply{Conn: conn, arm: &arm, armed: new(atomic.Bool)}, nil
		}})
	t.Cleanup(func() { _ = c.Close() })
	cfg := testConfig()
	cfg.TTL = time.Minute
	m := startManager(t, c, cfg)
	ctx := context.Background()
	l, err := m.Acquire(ctx, "resent")
	require.NoError(t, err)
	arm.Store(true)
	err = l.Release(ctx)
	assert.False(t, arm.Load(), "the release was sent")
	assert.Zero(t, s.Client().Exists(ctx, l.key).Val(), "route after Release")
	assert.NoError(t, err, "Release that deleted the route")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.met.released), "room_lease_released_total")
}

// A lease released twice is counted once: the second Release finds its
// route gone and returns nil, but the release was the first call's.
func TestALeaseReleasedTwiceCountsOnce(t *testing.T) {
	m := startManager(t, standalone(t).client(), testConfig())
	ctx := context.Background()
	l, err := m.Acquire(ctx, "twice")
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx), "first Release")
	require.NoError(t, l.Release(ctx), "second Release: the room is free")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.met.released), "room_lease_released_total")
}
