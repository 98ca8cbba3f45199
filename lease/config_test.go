package lease

import (
	"cmp"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
	"github.com/drainkit/drainkit/internal/testlog"
	"github.com/drainkit/drainkit/lifecycle"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		give Config
		want string // substring of the error; "" for valid
	}{
		{"defaults", Config{Node: "n1"}, ""},
		{"empty node", Config{}, "Config.Node is empty"},
		{"node with separator", Config{Node: "a|b"}, `Config.Node "a|b"`},
		{"node with space", Config{Node: "a b"}, `Config.Node "a b"`},
		{"short TTL", Config{Node: "n", TTL: 500 * time.Millisecond}, "Config.TTL 500ms is below MinTTL (1s): set it to 1s or more"},
		{"renew at TTL/3", Config{Node: "n", TTL: 9 * time.Second, RenewInterval: 3 * time.Second}, "Config.RenewInterval 3s"},
		{"call timeout above TTL/6", Config{Node: "n", CallTimeout: 2 * time.Second}, "Config.CallTimeout 2s"},
		{"renew every nanosecond", Config{Node: "n", RenewInterval: 1}, "Config.RenewInterval 1ns must be at least 10ms"},
		{"call timeout of a nanosecond", Config{Node: "n", CallTimeout: 1}, "Config.CallTimeout 1ns must be at least 10ms"},
		{"node id too long", Config{Node: strings.Repeat("n", MaxIDLen+1)}, "Config.Node \"nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn\"… (the node id; NODE_ID under fxlease): 129 bytes; want at most 128"},
		{"node id at the limit", Config{Node: strings.Repeat("n", MaxIDLen)}, ""},
		{"prefix with brace", Config{Node: "n", RoutePrefix: "r{"}, `Config.RoutePrefix "r{"`},
		{"equal prefixes", Config{Node: "n", RoutePrefix: "x:", FencePrefix: "x:"}, "must differ"},
		{"negative WaitReplicas", Config{Node: "n", WaitReplicas: -1}, "Config.WaitReplicas -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.validate()
			if tt.want == "" {
				require.NoError(t, err, "validate()")
			} else {
				require.ErrorContains(t, err, tt.want, "validate()")
			}
		})
	}
}

func TestValidateID(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{"room-42", ""},
		{"", "empty"},
		{"a{b", "'{' or '}'"},
		{"a}b", "'{' or '}'"},
		{"a b", "whitespace"},
		{"a\tb", "whitespace"},
		{strings.Repeat("x", MaxIDLen), ""},
		{strings.Repeat("x", MaxIDLen+1), "129 bytes"},
	}
	for _, tt := range tests {
		err := validateID(tt.give)
		if tt.want == "" {
			assert.NoError(t, err, "validateID(%.20q)", tt.give)
		} else {
			assert.ErrorContains(t, err, tt.want, "validateID(%.20q)", tt.give)
			assert.ErrorIs(t, err, ErrInvalidID, "validateID(%.20q): a handler answers 400 on it", tt.give)
		}
	}
}

// TestBadIDTouchesNothing: a bad id is rejected before any command.
func TestBadIDTouchesNothing(t *testing.T) {
	b := standalone(t)
	var cmds int
	count := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		cmds++
		return next(ctx, cmd)
	}}
	m := startManager(t, b.client(count), testConfig())
	cmds = 0 // the renewer sends pipelines only (no tick within this test's time)
	for _, id := range []string{"", "{x}", "a b", strings.Repeat("x", 200)} {
		_, err := m.Acquire(context.Background(), id)
		assert.ErrorIs(t, err, ErrInvalidID, "Acquire(%.20q)", id)
		_, err = m.Owner(context.Background(), id)
		assert.ErrorIs(t, err, ErrInvalidID, "Owner(%.20q)", id)
	}
	require.Zero(t, cmds, "commands sent for bad ids")
}

// A client as a team configures it, with go-redis's defaults, is refused
// in one error that names every option leases need changed, its value and
// the value wanted: not one option per failed start.
func TestNewListsEveryClientOptionLeasesNeed(t *testing.T) {
	cfg := Config{Node: "n", TTL: 10 * time.Second} // CallTimeout 1.666s
	tests := []struct {
		name   string
		client redis.UniversalClient
		want   []string // substrings of the one error; none for a client that fits
	}{
		{"go-redis defaults", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}),
			[]string{"*redis.Client options", "MaxRetries 3: want at most 1", "ContextTimeoutEnabled false: want true",
				"CallTimeout 1.666s", "e.g. MaxRetries: 1, ContextTimeoutEnabled: true, DialerRetries: 1 in redis.Options"}},
		{"retries only", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}),
			[]string{"MaxRetries 3: want at most 1"}},
		// Socket timeouts within a call are not enough: the renewer could
		// not lose the session at its deadline while a renewal hangs.
		{"short timeouts without context deadlines", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, ReadTimeout: time.Second, WriteTimeout: time.Second}),
			[]string{"ContextTimeoutEnabled false: want true", "a renewal that hangs tells the holders late"}},
		{"sentinel defaults", redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}}),
			[]string{"MaxRetries 3: want at most 1", "e.g. MaxRetries: 1, ContextTimeoutEnabled: true, DialerRetries: 1 in redis.FailoverOptions"}},
		{"cluster defaults", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}),
			[]string{"*redis.ClusterClient options", "ContextTimeoutEnabled false: want true", "in redis.ClusterOptions"}},
		// A Sentinel user's cluster client is told of the options it built it with.
		{"failover cluster routed randomly", redis.NewFailoverClusterClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}, RouteRandomly: true, MaxRetries: 1, ContextTimeoutEnabled: true}),
			[]string{"ReadOnly true", "in redis.FailoverOptions"}},
		{"cluster retries", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, MaxRetries: 3, ContextTimeoutEnabled: true}),
			[]string{"MaxRetries 3", "(0 or -1 is none)"}},
		// Reads from replicas: a lagging one shows a live node's session gone.
		{"cluster reading from replicas", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ReadOnly: true, ContextTimeoutEnabled: true}),
			[]string{"ReadOnly true", "give leases a client of their own"}},
		// go-redis turns a failover cluster client's ReplicaOnly into ReadOnly: the error names what the user set.
		{"failover cluster on replicas only", redis.NewFailoverClusterClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}, ReplicaOnly: true, MaxRetries: 1, ContextTimeoutEnabled: true}),
			[]string{"ReadOnly true", "ReplicaOnly", "in redis.FailoverOptions"}},
		{"cluster routed by latency", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, RouteByLatency: true, ContextTimeoutEnabled: true}),
			[]string{"ReadOnly true (RouteByLatency, RouteRandomly"}},
		{"cluster routed randomly", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, RouteRandomly: true, ContextTimeoutEnabled: true}),
			[]string{"ReadOnly true"}},
		{"cluster fit", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true}), nil},
		// No seeds: go-redis would answer "cluster has no nodes", which Start waits out as a cluster forming.
		{"cluster without seeds", redis.NewClusterClient(&redis.ClusterOptions{ContextTimeoutEnabled: true}),
			[]string{"*redis.ClusterClient has no seed nodes: set redis.ClusterOptions.Addrs"}},
		// A Ring moves an unreachable shard's keys to the others: two owners.
		{"ring, however configured", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, MaxRetries: 1, ContextTimeoutEnabled: true}),
			[]string{"*redis.Ring cannot keep leases", "another shard", "*redis.Client", "*redis.ClusterClient"}},
		{"fit", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: 1, ContextTimeoutEnabled: true}), nil},
		{"fit without retries", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, ContextTimeoutEnabled: true}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer tt.client.Close()
			_, err := New(tt.client, cfg)
			if len(tt.want) == 0 {
				require.NoError(t, err, "New()")
				return
			}
			require.Error(t, err, "New(): want an error containing %q", tt.want)
			for _, w := range tt.want {
				assert.ErrorContains(t, err, w, "New()")
			}
			assert.NotContains(t, err.Error(), "\n", "New(): want one line")
			assert.ErrorIs(t, err, lifecycle.ErrConfig, "New(): so fxmodule.Run exits 78")
		})
	}
}

// Every configuration New or Validate refuses is a configuration error,
// and an error that is not one does not match.
func TestConfigErrorsMatchErrConfig(t *testing.T) {
	fit := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: 1, ContextTimeoutEnabled: true})
	defer fit.Close()
	custom := struct{ redis.UniversalClient }{fit} // a client type New does not know
	reg := prometheus.NewRegistry()
	_, err := New(fit, Config{Node: "n", Registerer: reg})
	require.NoError(t, err, "New")
	tests := []struct {
		name   string
		client redis.UniversalClient
		cfg    Config
	}{
		{"no client", nil, Config{Node: "n"}},
		{"a nil *redis.Client", (*redis.Client)(nil), Config{Node: "n"}},
		{"a nil *redis.ClusterClient", (*redis.ClusterClient)(nil), Config{Node: "n"}},
		{"no node", fit, Config{}},
		{"short TTL", fit, Config{Node: "n", TTL: time.Millisecond}},
		{"WAIT on a custom client", custom, Config{Node: "n", WaitReplicas: 1}},
		{"RoutePrefix taken on the Registerer", fit, Config{Node: "n", Registerer: reg}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.client, tt.cfg)
			assert.ErrorIs(t, err, lifecycle.ErrConfig, "New()")
			if strings.Contains(tt.name, "nil") {
				assert.EqualError(t, err, "lease: client is nil")
			}
		})
	}
	assert.ErrorIs(t, (Config{}).validate(), lifecycle.ErrConfig, "validate()")
	assert.NotErrorIs(t, ErrDraining, lifecycle.ErrConfig, "want only configuration errors to match")
}

func TestProbe(t *testing.T) {
	b := standalone(t)
	c := b.client()
	cfg := testConfig()
	cfg.TTL = time.Minute // the renewer does not tick while the test edits the session
	m := startManager(t, c, cfg)
	ctx := context.Background()
	require.NoError(t, m.Probe(ctx), "Probe after Start")
	epoch := c.HGet(ctx, m.nodeKey(), "epoch").Val()
	c.HSet(ctx, m.nodeKey(), "epoch", "1")
	require.ErrorContains(t, m.Probe(ctx), "another process", "Probe with another epoch")
	c.Del(ctx, m.nodeKey())
	require.ErrorContains(t, m.Probe(ctx), "missing", "Probe without a session")
	c.HSet(ctx, m.nodeKey(), "epoch", epoch)
	require.ErrorContains(t, m.Probe(ctx), "no TTL", "Probe of a session without a TTL")
	c.PExpire(ctx, m.nodeKey(), m.cfg.TTL/4)
	require.ErrorContains(t, m.Probe(ctx), "renewals are failing", "Probe with a stale session")
	m.sess.Store(nil)
	require.ErrorContains(t, m.Probe(ctx), "it was lost and is being started again", "Probe while the session is started again")
}

// A Manager not running (never started, its Start failed, or stopped) is
// not said to be starting its session again: nothing will.
func TestProbeOfAManagerNotRunningSaysSo(t *testing.T) {
	c := standalone(t).client()
	m, err := New(c, testConfig())
	require.NoError(t, err)
	ctx := context.Background()
	require.ErrorContains(t, m.Probe(ctx), "the lease manager is not running", "Probe before Start")
	require.NoError(t, m.Start(ctx))
	require.NoError(t, m.Probe(ctx), "Probe after Start")
	require.NoError(t, m.Stop(ctx))
	require.ErrorContains(t, m.Probe(ctx), "the lease manager is not running", "Probe after Stop")
}

// TestStartWarnsOfDialRetriesLongerThanACall: with go-redis's default dial
// retries, a call to a server that is down ends as a timeout naming no
// refusal, and a Cluster client follows a failover late; Start says so
// once and what to set, and says nothing with DialerRetries: 1.
func TestStartWarnsOfDialRetriesLongerThanACall(t *testing.T) {
	s := redistest.Start(t)
	tests := []struct {
		name string
		give int // DialerRetries
		want int // warnings
	}{
		{"go-redis's default, 5 dials 100 ms apart", 0, 1},
		{"one dial", 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: 1, ContextTimeoutEnabled: true, DialerRetries: tt.give})
			t.Cleanup(func() { _ = c.Close() })
			got, logs := startWarnings(t, c, 0, "go-redis retries a refused dial")
			assert.Equal(t, tt.want, got, "warnings; got %d, want %d in %s", got, tt.want, logs)
			if tt.want > 0 {
				assert.Contains(t, logs, "set DialerRetries: 1 in redis.Options")
			}
		})
	}
}

// TestStartWarnsOfASlowSlotMapReload: go-redis reloads a Cluster's slot
// map without a context, waiting ReadTimeout (5 s by default) on every try
// of a read from a hung node, so a failover of a primary that hangs is
// followed late; Start says so once and what to set, and says nothing once
// the read's tries and the dials each end within TTL/2.
func TestStartWarnsOfASlowSlotMapReload(t *testing.T) {
	cl := redistest.StartCluster(t)
	tests := []struct {
		name       string
		read, dial time.Duration
		want       int // warnings
	}{
		{"go-redis's defaults, 5 s", 0, 0, 1},
		{"a read of TTL/2 tried twice", 500 * time.Millisecond, 500 * time.Millisecond, 1},
		{"a read of TTL/4 tried twice, one dial of TTL/2", 250 * time.Millisecond, 500 * time.Millisecond, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cl.ClientWith(&redis.ClusterOptions{MaxRetries: 1, ContextTimeoutEnabled: true, DialerRetries: 1,
				ReadTimeout: tt.read, DialTimeout: tt.dial})
			got, logs := startWarnings(t, c, 0, "go-redis reloads the slot map without a context")
			assert.Equal(t, tt.want, got, "warnings; got %d, want %d in %s", got, tt.want, logs)
			if tt.want > 0 {
				assert.Contains(t, logs, "keep each within 500ms")
			}
		})
	}
}

// startWarnings starts a Manager on c (with ttl, unless 0), stopped at cleanup, and returns how
// many WARN lines of its log begin with "lease: "+msg, and the whole log.
func startWarnings(t *testing.T, c redis.UniversalClient, ttl time.Duration, msg string) (int, string) {
	t.Helper()
	var logs testlog.Buffer
	cfg := testConfig()
	cfg.TTL = cmp.Or(ttl, cfg.TTL)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	startManager(t, c, cfg)
	return strings.Count(logs.String(), `level=WARN msg="lease: `+msg), logs.String()
}
