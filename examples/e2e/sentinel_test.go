package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/drainkit/drainkit/examples/internal/e2e"
	"github.com/drainkit/drainkit/internal/redistest"
)

// TestRedisSentinelPrimaryFailure SIGKILLs the Sentinel-managed primary
// under load, or SIGSTOPs it (a hung host); the sentinel
// (down-after-milliseconds 1 s) promotes the replica 2 to 3 s later. The
// room-services connect through REDIS_SENTINEL_URL, at the two TTLs
// docs/leases.md ("On Redis Sentinel") weighs: 3 s, room-service's
// default with Sentinel, keeps the rooms through a planned failover, not
// a crash (every session is lost and every room taken again with a higher
// fence), and 8 s keeps them through a crash. Nothing is lost or applied
// twice, no command fails, and every room is served again within
// servedAgain of the announcement.
//
// servedAgain is what the mechanisms give. A killed primary refuses
// dials, and the room-services' own calls pass go-redis's PoolSize of
// failed dials at once, so their clients reach the new primary at
// go-redis's next probe, once a second. A hung host takes the dials, but a
// call sent to it before the announcement waits out its CallTimeout
// (TTL/6). Then the renewer's next tick starts the session
// (RenewInterval, TTL/6) and the command's Acquire takes the room (two
// calls, CallTimeout each), or, with the session kept, the command's call
// waits out its backoff (at most CallTimeout) and is sent again.
func TestRedisSentinelPrimaryFailure(t *testing.T) {
	for _, tt := range []struct {
		name   string
		paused bool
		ttl    time.Duration
		keeps  bool // no lease is lost
	}{
		{"killed-3s", false, 3 * time.Second, false},
		{"paused-3s", true, 3 * time.Second, false},
		{"killed-8s", false, 8 * time.Second, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			servedAgain := 3*tt.ttl/6 + time.Second // go-redis's probe
			if tt.paused {
				servedAgain = 4 * tt.ttl / 6 // a call sent to the hung host first
			}
			sen := redistest.StartSentinel(t)
			c := startServices(t, e2e.Config{RedisURL: sen.URL(), RedisVar: "REDIS_SENTINEL_URL", LeaseTTL: tt.ttl})
			var killed, named time.Time
			res, _ := faultUnderLoad(t, c, func(ctx context.Context) {
				killed = time.Now()
				failover := sen.FailoverKilled
				if tt.paused {
					failover = sen.FailoverPaused
				}
				promoted := failover(ctx)
				named = time.Now()
				t.Logf("%s the primary; the sentinel named %s %s later", tt.name[:6], promoted.Addr, named.Sub(killed).Round(time.Millisecond))
			})
			var late time.Duration
			for _, o := range res.Outcomes {
				if o.Acked {
					late = max(late, o.Answered.Sub(maxTime(o.Sent, named)))
				}
			}
			r := check(t, c, res, nil, e2e.Window{From: killed, To: named.Add(servedAgain)})
			t.Logf("latest answer after the announcement (or after its sending, if later): %s", late.Round(time.Millisecond))
			assert.LessOrEqual(t, late, servedAgain, "a room served again later than %s after the announcement", servedAgain)
			failover := named.Sub(killed)
			assert.LessOrEqual(t, r.Latency.P99, failover+servedAgain,
				"p99 of the commands pending during the fault; want at most the failover (%s) + %s", failover.Round(time.Millisecond), servedAgain)
			assert.Zero(t, r.BalancerRetries, "balancer retries: no gateway went away, so none are the balancer's to make")
			if tt.keeps {
				assert.Zero(t, r.LeasesLost, "leases lost at a TTL that keeps them through a crash")
			} else {
				assert.Positive(t, r.LeasesLost, "leases lost at a TTL that does not keep them: with none, the crash moved no room")
			}
		})
	}
}
