package lease

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
)

// A planned Sentinel failover (SENTINEL FAILOVER) at the TTL docs/leases.md
// advises for Sentinel, 3 s, costs no session and no lease: Sentinel
// names the new primary about a second after promoting it, and the
// session, last renewed on the old primary before the promotion, outlives
// that on the new one. The renewals then go to the new primary, where the
// session keeps its epoch, and Place names the nodes it named before.
func TestSentinelFailoverAtTheAdvisedTTLKeepsEveryLease(t *testing.T) {
	sen := redistest.StartSentinel(t)
	ctx := context.Background()
	cfg := testConfig()
	cfg.TTL = 3 * time.Second
	var lost atomic.Int32
	cfg.OnLost = func(*Lease, error) { lost.Add(1) }
	m := startManager(t, sen.Client(), cfg)
	otherCfg := testConfig()
	otherCfg.TTL = cfg.TTL
	other := startManager(t, sen.Client(), otherCfg)
	placed := placements(t, m, other)
	var leases []*Lease
	for i := range 20 {
		l, err := m.Acquire(ctx, "room-"+strconv.Itoa(i))
		require.NoError(t, err)
		leases = append(leases, l)
	}
	epoch := m.lastEpoch.Load()

	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	promoted := sen.Failover(fctx)
	// A whole TTL of renewals confirmed after the switch: the session, had
	// it expired on the new primary, would have been found gone by now.
	after := testutil.ToFloat64(m.met.renewed)
	perTTL := float64(cfg.TTL / m.cfg.RenewInterval)
	waitFor(t, "a TTL of renewals after the failover", func() bool { return testutil.ToFloat64(m.met.renewed) >= after+perTTL })

	assert.Zero(t, lost.Load(), "leases lost")
	assert.Equal(t, epoch, m.lastEpoch.Load(), "the session's epoch")
	got, err := promoted.Client().HGet(ctx, m.nodeKey(), "epoch").Result()
	require.NoError(t, err, "the session on the new primary")
	assert.Equal(t, strconv.FormatInt(epoch, 10), got, "the session's epoch on the new primary")
	for _, l := range leases {
		assert.NoError(t, l.Context().Err(), "lease %s", l.ID())
	}
	assert.Equal(t, placed, placements(t, m, other), "rooms placed after the failover; want as before: the index moved with the data")
}

// TestSentinelPrimaryFailure: a Sentinel primary killed or paused (a hung
// host) under a Manager holding rooms, its client shared with the
// service's own traffic, is named replaced 2 to 3 s later
// (down-after-milliseconds 1 s). At 3 s TTL the session's deadline comes
// first: every lease is lost with ErrLost, and rooms are taken on the new
// primary with higher fences. At 8 s, docs/leases.md's advice, a renewal
// reaches the new primary: no lease is lost.
//
// How soon after the announcement a room is taken has a bound that the
// mechanisms give, not the machine: a killed primary refuses the
// service's dials, so go-redis's pool passes PoolSize failed dials within
// a fraction of a second and dials again only once its probe, once a
// second, gets through (docs/leases.md, "The client you give it"); then
// the renewer's next tick and two calls (the session's start, the room's
// acquisition), or, with the session kept, the acquisition's own backoff
// (at most CallTimeout) and call. A paused primary takes connections, so
// nothing stops the dials, but a call sent to it before the announcement
// waits out its CallTimeout.
func TestSentinelPrimaryFailure(t *testing.T) {
	const dialProbe = time.Second // go-redis's probe of a server it stopped dialing
	for _, tt := range []struct {
		name   string
		paused bool
		ttl    time.Duration
		keeps  bool // every lease is kept
	}{
		{"killed-3s", false, 3 * time.Second, false},
		{"paused-3s", true, 3 * time.Second, false},
		{"killed-8s", false, 8 * time.Second, true},
		{"paused-8s", true, 8 * time.Second, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sen := redistest.StartSentinel(t)
			ctx := context.Background()
			cfg := testConfig()
			cfg.TTL = tt.ttl
			client := sen.Client()
			m := startManager(t, client, cfg)
			fences := map[string]int64{}
			var leases []*Lease
			for i := range 20 {
				l, err := m.Acquire(ctx, "room-"+strconv.Itoa(i))
				require.NoError(t, err)
				leases = append(leases, l)
				fences[l.ID()] = l.Token()
			}
			epoch := m.lastEpoch.Load()
			dialErrors := countDialErrors(client)
			serviceTraffic(t, client)

			fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			failover, within := sen.FailoverKilled, dialProbe
			if tt.paused { // a call sent to the hung host first
				failover, within = sen.FailoverPaused, m.cfg.CallTimeout
			}
			within += m.cfg.RenewInterval + 2*m.cfg.CallTimeout
			promoted, failed := failover(fctx)
			named := time.Now()
			t.Logf("the sentinel named the new primary %s after the failure", named.Sub(failed).Round(time.Millisecond))
			if !tt.paused { // go-redis probes only once PoolSize dials failed
				assert.GreaterOrEqual(t, dialErrors.Load(), int64(client.Options().PoolSize),
					"failed dials during the outage: want enough for go-redis to stop dialing")
			}
			actx, cancel := context.WithDeadline(ctx, named.Add(within))
			_, err := m.Acquire(actx, "after-failover")
			cancel()
			require.NoError(t, err, "a room within %s of the sentinel naming the new primary", within)
			t.Logf("a room taken %s after the sentinel named the new primary", time.Since(named).Round(time.Millisecond))
			if tt.keeps {
				waitFor(t, "a renewal sent after the announcement, confirmed", func() bool { return m.okAt.Load().After(named) })
				assert.Equal(t, epoch, m.lastEpoch.Load(), "the session's epoch: want the one from before the failover")
			}
			got, err := promoted.Client().HGet(ctx, m.nodeKey(), "epoch").Result()
			require.NoError(t, err, "the session on the new primary")
			assert.Equal(t, strconv.FormatInt(m.lastEpoch.Load(), 10), got, "the session's epoch on the new primary")
			for _, l := range leases {
				if tt.keeps {
					assert.NoError(t, l.Context().Err(), "lease %s: want kept (cause %v)", l.ID(), context.Cause(l.Context()))
				} else {
					assert.ErrorIs(t, context.Cause(l.Context()), ErrLost, "how lease %s ended", l.ID())
				}
				again, err := m.Acquire(ctx, l.ID())
				require.NoError(t, err, "room %s after the failover", l.ID())
				if again != l {
					assert.Greater(t, again.Token(), fences[l.ID()], "room %s's fence, taken again", l.ID())
				}
			}
		})
	}
}

// serviceTraffic sends a service's own calls on c, 200 a second, each
// with a 100 ms deadline, until the test ends, as a service that shares
// its client with the Manager does (docs/leases.md advises it).
func serviceTraffic(t *testing.T, c *redis.Client) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			cctx, cancelCall := context.WithTimeout(ctx, 100*time.Millisecond)
			_ = c.Get(cctx, "service-key").Err() // failing during the outage is the point
			cancelCall()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// countDialErrors counts c's failed dials, its background probes' included
// (which start only once PoolSize dials failed).
func countDialErrors(c *redis.Client) *atomic.Int64 {
	var n atomic.Int64
	c.AddHook(dialErrorHook{&n})
	return &n
}

type dialErrorHook struct{ n *atomic.Int64 }

func (h dialErrorHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			h.n.Add(1)
		}
		return conn, err
	}
}

func (dialErrorHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (dialErrorHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Start warns of a TTL below the 3 s docs/leases.md advises for Sentinel,
// which knows the client for a failover client: at the default 1 s, a
// failover, planned or not, costs every room (a new user's trial started
// at the default without a word). Its log names no "FailoverClient",
// go-redis's placeholder for the address, either.
func TestStartWarnsOfASentinelTTLBelow3s(t *testing.T) {
	sen := redistest.StartSentinel(t)
	for _, tt := range []struct {
		ttl  time.Duration
		want int
	}{{time.Second, 1}, {3 * time.Second, 0}} {
		t.Run(tt.ttl.String(), func(t *testing.T) {
			got, logs := startWarnings(t, sen.Client(), tt.ttl, "a Sentinel failover")
			assert.Equal(t, tt.want, got, "warnings; got %d, want %d in %s", got, tt.want, logs)
			assert.NotContains(t, logs, "FailoverClient", "a log naming go-redis's placeholder for a server")
		})
	}
}

// NewFailoverClusterClient's client follows the same announcement and is
// warned of too (a new user's trial used it and got no warning). Its
// sentinel is not reached: go-redis leaves its sentinel's goroutines
// running after Close, and the warning comes before any call.
func TestStartWarnsOfASentinelTTLBelow3sOnAFailoverClusterClient(t *testing.T) {
	for _, tt := range []struct {
		ttl  time.Duration
		want int
	}{{time.Second, 1}, {3 * time.Second, 0}} {
		t.Run(tt.ttl.String(), func(t *testing.T) {
			c := redis.NewFailoverClusterClient(&redis.FailoverOptions{MasterName: redistest.SentinelMaster,
				SentinelAddrs: []string{"127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))}, PoolSize: 1000, // no dial cut-off, whose probe outlives Close
				MaxRetries: 1, ContextTimeoutEnabled: true, DialerRetries: 1, DialTimeout: time.Second})
			t.Cleanup(func() { _ = c.Close() })
			cfg := testConfig()
			cfg.TTL = tt.ttl
			logs, err := startFor(t, c, cfg, 100*time.Millisecond)
			require.Error(t, err, "Start with no sentinel to reach")
			got := strings.Count(logs, `level=WARN msg="lease: a Sentinel failover`)
			assert.Equal(t, tt.want, got, "warnings; got %d, want %d in %s", got, tt.want, logs)
		})
	}
}

// A master name no sentinel monitors (a typo, say) is named as the cause:
// go-redis says "all sentinels specified in configuration are
// unreachable" with each sentinel's empty answer, and Start took that for
// a server that refused INFO and failed at once, with two warnings about
// what it could not read. It waits, as for sentinels not reached, saying
// what it waits for.
func TestStartNamesAMasterNoSentinelMonitors(t *testing.T) {
	sen := redistest.StartSentinel(t)
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "no-such-master", SentinelAddrs: []string{sen.Sentinel.Addr},
		PoolSize:   1000, // no dial cut-off, whose probe outlives Close
		MaxRetries: 1, ContextTimeoutEnabled: true, DialerRetries: 1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = c.Close() })
	logs, err := startFor(t, c, testConfig(), 2*time.Second)
	require.Error(t, err, "Start with a master no sentinel monitors")
	assert.Contains(t, err.Error(), "FailoverOptions.MasterName", "the error names the setting")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "Start waits, as for sentinels not reached")
	assert.NotContains(t, logs, "cannot read", "warnings about what a server refused: none did")
	assert.Contains(t, logs, "FailoverOptions.MasterName", "the WARN while Start waits names the setting")
}
