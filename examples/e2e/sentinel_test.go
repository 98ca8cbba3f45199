package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/internal/e2e"
	"github.com/drainkit/drainkit/internal/redistest"
)

// TestRedisSentinelPrimaryFailure fails the Sentinel-managed primary under
// load: SIGKILLed, SIGSTOPped (a hung host), or replaced in a planned
// failover (SENTINEL FAILOVER). The room-services connect through
// REDIS_SENTINEL_URL, at the two TTLs docs/leases.md ("On Redis Sentinel")
// weighs: 3 s, room-service's default with Sentinel, keeps the rooms
// through a planned failover, not a crash (every session is lost and every
// room taken again with a higher fence), and 8 s keeps them through a
// crash. Nothing is lost or applied twice, no command fails, and every
// room is served again within servedAgain of the moment it can be:
//
//   - A crash or a hang: from the announcement. A killed primary refuses
//     dials, and the room-services' own calls pass go-redis's PoolSize of
//     failed dials at once, so their clients reach the new primary at
//     go-redis's next probe, once a second. A hung host takes the dials,
//     but a call sent to it before the announcement waits out its
//     CallTimeout (TTL/6). Then the renewer's next tick starts the session
//     (RenewInterval, TTL/6) and the command's Acquire takes the room (two
//     calls, CallTimeout each), or, with the session kept, the command's
//     call waits out its backoff (at most CallTimeout) and is sent again.
//   - A planned failover: from when the old primary, pointed at the new one
//     as an operator does, replicates from it. Until then the old primary
//     still takes the writes of clients that have not switched, which the
//     failover discards: with REDIS_WAIT_REPLICAS=1 none is acknowledged,
//     and the new primary has no replica to confirm the rest. After it, a
//     command waits out the gateway's backoff (at most 240 ms) and the
//     room's reload and append, a call each: within 3·TTL/6. The case
//     fails unless the old primary did apply commands that the failover
//     then discarded: without them it tries nothing the setting prevents.
func TestRedisSentinelPrimaryFailure(t *testing.T) {
	for _, tt := range []struct {
		name  string
		how   string // killed, paused, planned
		ttl   time.Duration
		keeps bool // no lease is lost
	}{
		{"killed-3s", "killed", 3 * time.Second, false},
		{"paused-3s", "paused", 3 * time.Second, false},
		{"killed-8s", "killed", 8 * time.Second, true},
		{"planned-3s", "planned", 3 * time.Second, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			servedAgain := 3*tt.ttl/6 + time.Second // go-redis's probe
			switch tt.how {
			case "paused":
				servedAgain = 4 * tt.ttl / 6 // a call sent to the hung host first
			case "planned":
				servedAgain = 3 * tt.ttl / 6
			}
			sen := redistest.StartSentinel(t)
			cfg := e2e.Config{RedisURL: sen.URL(), RedisVar: "REDIS_SENTINEL_URL", LeaseTTL: tt.ttl}
			if tt.how == "planned" {
				cfg.RoomEnv = []string{"REDIS_WAIT_REPLICAS=1"}
			}
			c := startServices(t, cfg)
			var failed, named, servable time.Time // servable: when a room can be served again
			discarded := int64(-1)                // commands the old primary applied that the new one lacks (planned)
			res, _ := faultUnderLoad(t, c, func(ctx context.Context) {
				planned := func(ctx context.Context) (*redistest.Server, time.Time) {
					began := time.Now() // SENTINEL FAILOVER follows once the replica caught up: under load, at once
					return sen.Failover(ctx), began
				}
				failover := map[string]func(context.Context) (*redistest.Server, time.Time){
					"killed": sen.FailoverKilled, "paused": sen.FailoverPaused, "planned": planned}[tt.how]
				old := sen.Primary(ctx)
				var promoted *redistest.Server
				promoted, failed = failover(ctx)
				named = time.Now()
				t.Logf("%s the primary; the sentinel named %s %s later", tt.how, promoted.Addr, named.Sub(failed).Round(time.Millisecond))
				servable = named
				if tt.how == "planned" {
					// The new primary took no command before go-redis heard it named (now, give or
					// take the read): what the old one has beyond it is what the failover discards.
					atPromotion := roomSeqs(t, ctx, promoted)
					discarded = 0
					for room, seq := range roomSeqs(t, ctx, old) {
						discarded += max(0, seq-atPromotion[room])
					}
					sen.Demote(ctx, old, promoted)
					servable = sen.WaitReplicating(ctx, old, promoted)
					t.Logf("the old primary replicates from the new one %s after the announcement", servable.Sub(named).Round(time.Millisecond))
				}
			})
			var late time.Duration
			for _, o := range res.Outcomes {
				if o.Acked {
					late = max(late, o.Answered.Sub(maxTime(o.Sent, servable)))
				}
			}
			r := check(t, c, res, nil, e2e.Window{From: failed, To: servable.Add(servedAgain)})
			t.Logf("latest answer after a room could be served again (or after its sending, if later): %s", late.Round(time.Millisecond))
			assert.LessOrEqual(t, late, servedAgain, "a room served again later than %s after it could be", servedAgain)
			fault := servable.Sub(failed)
			assert.LessOrEqual(t, r.Latency.P99, fault+servedAgain,
				"p99 of the commands pending during the fault; want at most the fault (%s) + %s", fault.Round(time.Millisecond), servedAgain)
			assert.Zero(t, r.BalancerRetries, "balancer retries: no gateway went away, so none are the balancer's to make")
			if tt.how == "planned" {
				t.Logf("commands the old primary applied that the failover discarded (none acknowledged): %d", discarded)
				assert.Positive(t, discarded, "commands discarded by the failover: with none, no command reached the old primary "+
					"after the promotion, and this case did not try what REDIS_WAIT_REPLICAS prevents")
			}
			if tt.keeps {
				assert.Zero(t, r.LeasesLost, "leases lost at a TTL that keeps them")
			} else {
				assert.Positive(t, r.LeasesLost, "leases lost at a TTL that does not keep them: with none, the crash moved no room")
			}
		})
	}
}

// roomSeqs reads the sequence number of every room on s: how many
// commands it has applied to each (room:seq:{ID}).
func roomSeqs(t *testing.T, ctx context.Context, s *redistest.Server) map[string]int64 {
	t.Helper()
	c := s.Client()
	seqs := map[string]int64{}
	keys := c.Scan(ctx, 0, "room:seq:*", 1000).Iterator()
	for key := range keys.Vals(ctx) {
		n, err := c.Get(ctx, key).Int64()
		require.NoError(t, err, "GET %s on %s", key, s.Addr)
		seqs[key] = n
	}
	require.NoError(t, keys.Err(), "SCAN on %s", s.Addr)
	return seqs
}
