package redischeck

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/drainkit/drainkit/readiness"
)

// DefaultTimeout is the timeout of [Ping]: a PING does no work on the
// server, so one slower than this means the server cannot serve either.
const DefaultTimeout = 200 * time.Millisecond

// Ping checks a Redis server (standalone, Sentinel or Cluster) with PING,
// which writes nothing. The check is gating, named "redis", with
// [DefaultTimeout].
func Ping(client redis.UniversalClient) readiness.Check {
	return readiness.Check{Name: "redis", Tier: readiness.Gating, Timeout: DefaultTimeout,
		Probe: func(ctx context.Context) error { return client.Ping(ctx).Err() }}
}
