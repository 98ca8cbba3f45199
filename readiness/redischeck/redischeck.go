package redischeck

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	redisinternal "github.com/drainkit/drainkit/internal/redischeck"
	"github.com/drainkit/drainkit/readiness"
)

// DefaultTimeout is the timeout of [Ping]: a PING does no work on the
// server, so one slower than this means the server cannot serve either.
const DefaultTimeout = 200 * time.Millisecond

// Ping checks a Redis server (standalone, Sentinel or Cluster) with PING,
// which writes nothing. The check is gating, named "redis", with
// [DefaultTimeout]. On a Cluster client a failed PING makes the client
// reload its slot map, so after a primary's failover the probe stops
// reaching the dead primary once its replica took over (go-redis would
// keep it for up to a minute: docs/leases.md, "On a Redis Cluster").
//
// A PING must end with the probe's context. go-redis bounds a call by its
// context only with ContextTimeoutEnabled, and otherwise by ReadTimeout
// (3 s by default): so Ping sends each PING of a *redis.Client without
// either bound through a clone of it whose socket deadline is what is left
// of the probe's (WithTimeout: the same pool and hooks), which also follows
// a Timeout the caller raised. Give a *redis.ClusterClient
// ContextTimeoutEnabled, as leases need anyway: a hung node would hold its
// PING past the probe. A nil client panics.
//
// While Redis refuses connections the check fails as "deadline exceeded":
// go-redis retries the dial until the probe's deadline; its own log line
// says "connection refused".
func Ping(client redis.UniversalClient) readiness.Check {
	if redisinternal.IsNil(client) {
		panic("redischeck: Ping: client is nil")
	}
	c, unbounded := client.(*redis.Client)
	unbounded = unbounded && !bounded(c.Options())
	return readiness.Check{Name: "redis", Tier: readiness.Gating, Timeout: DefaultTimeout,
		Probe: func(ctx context.Context) error {
			client := client
			if unbounded {
				timeout := DefaultTimeout // a probe without a deadline still ends
				if deadline, ok := ctx.Deadline(); ok {
					timeout = max(time.Until(deadline), time.Millisecond)
				}
				client = c.WithTimeout(timeout)
			}
			err := client.Ping(ctx).Err()
			if err != nil && !errors.Is(err, context.Canceled) {
				redisinternal.FollowFailover(client)
			}
			return err
		}}
}

// bounded reports whether o ends every call within DefaultTimeout.
func bounded(o *redis.Options) bool {
	within := func(d time.Duration) bool { return d > 0 && d <= DefaultTimeout }
	return o.ContextTimeoutEnabled || within(o.ReadTimeout) && within(o.WriteTimeout)
}
