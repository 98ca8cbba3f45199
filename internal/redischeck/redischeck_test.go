package redischeck

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
)

func TestAtLeastVersion(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{"7.0.15", true},
		{"5.0.0", true},
		{"4.0.14", false},
		{"4.9", false},
		{"10.0.0", true},
		{"", true},    // unreadable: the scripts fail loudly themselves
		{"x.y", true}, // unparseable likewise
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, atLeast(tt.give, minVersion), "atLeast(%q, 5.0.0)", tt.give)
	}
}

// TestDialWarning: go-redis's default dial retries (5, 100 ms apart) outlast
// a lease call at the default TTL; one dial, or retries within a call, do not.
func TestDialWarning(t *testing.T) {
	const call = time.Second / 6
	tests := []struct {
		name string
		give redis.UniversalClient
		want []string // substrings; none: no warning
	}{
		{"defaults", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}),
			[]string{"for 400ms (DialerRetries 5, 100ms apart), at least CallTimeout 166ms", `instead of "connection refused";`,
				"set DialerRetries: 1 in redis.Options"}},
		{"cluster defaults", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}),
			[]string{"DialerRetries 5", "a failover is followed later", "in redis.ClusterOptions"}},
		{"one dial", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialerRetries: 1}), nil},
		{"retries within a call", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialerRetries: 3, DialerRetryTimeout: 50 * time.Millisecond}), nil},
		{"retries as long as a call", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialerRetries: 2, DialerRetryTimeout: call}),
			[]string{"DialerRetries 2"}},
		// -1 and a negative wait read as go-redis's pools read them: the default.
		{"cluster, -1", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, DialerRetries: -1}),
			[]string{"DialerRetries 5"}},
		{"negative wait", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialerRetryTimeout: -1}),
			[]string{"DialerRetries 5, 100ms apart"}},
		{"sentinel defaults", redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}}),
			[]string{"DialerRetries: 1 in redis.FailoverOptions"}},
		{"a backoff of the caller's own", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1",
			DialerRetryBackoff: func(int) time.Duration { return time.Second }}), nil},
		{"ring: refused by Client already", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() { _ = tt.give.Close() }()
			assertWarning(t, DialWarning(tt.give, call), tt.want)
		})
	}
}

// TestReloadWarning: go-redis's defaults hold a Cluster client's slot map
// reload on a hung node past the bound (5 s a read, sent as often as
// MaxRetries allows; 5 s a dial, dialed five times); waits within it, and
// clients that do not reload from the nodes, give no warning.
func TestReloadWarning(t *testing.T) {
	const bound = 500 * time.Millisecond
	seeds := []string{"127.0.0.1:1"}
	fit := func(o redis.ClusterOptions) *redis.ClusterClient {
		o.Addrs, o.MaxRetries, o.DialerRetries = seeds, 1, 1
		o.ReadTimeout, o.DialTimeout = cmp.Or(o.ReadTimeout, bound/2), cmp.Or(o.DialTimeout, bound)
		return redis.NewClusterClient(&o)
	}
	tests := []struct {
		name string
		give redis.UniversalClient
		want []string // substrings; none: no warning
	}{
		{"cluster defaults", redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds}),
			[]string{"does not answer up to 5s to read (ReadTimeout 5s × 1 tries, MaxRetries -1) and 25.4s to connect (DialTimeout 5s × 5 dials):",
				"keep each within 500ms", "in redis.ClusterOptions"}},
		{"within the bound", fit(redis.ClusterOptions{}), nil},
		// A read that timed out is sent again: MaxRetries 1 doubles the wait.
		{"read timeout of the bound, sent twice", fit(redis.ClusterOptions{ReadTimeout: bound}),
			[]string{"up to 1s to read (ReadTimeout 500ms × 2 tries, MaxRetries 1):"}},
		{"no read timeout", fit(redis.ClusterOptions{ReadTimeout: -1}), []string{"without end to read"}},
		{"dial timeout over the bound", fit(redis.ClusterOptions{DialTimeout: time.Second}),
			[]string{"up to 1s to connect (DialTimeout 1s × 1 dials)"}},
		{"slots of its own", redis.NewClusterClient(&redis.ClusterOptions{
			ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) { return nil, nil }}), nil},
		{"standalone", redis.NewClient(&redis.Options{Addr: seeds[0]}), nil},
		{"sentinel", redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: seeds}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() { _ = tt.give.Close() }()
			assertWarning(t, ReloadWarning(tt.give, bound), tt.want)
		})
	}
}

// assertWarning checks that a warning holds every substring of want, or
// that there is none for a nil want.
func assertWarning(t *testing.T, got string, want []string) {
	t.Helper()
	if want == nil {
		assert.Empty(t, got)
	}
	for _, w := range want {
		assert.Contains(t, got, w)
	}
}

// Sentinel knows a failover client from go-redis's placeholder address,
// which Addr never shows.
func TestSentinel(t *testing.T) {
	tests := []struct {
		name     string
		give     *redis.Client
		want     bool
		wantAddr string
	}{
		{"a standalone client", redis.NewClient(&redis.Options{Addr: "10.0.0.1:6379"}), false, "10.0.0.1:6379"},
		{"a failover client", redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{"10.0.0.1:26379"}}),
			true, "the Sentinel master of a redis.FailoverOptions client"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer tt.give.Close()
			assert.Equal(t, tt.want, Sentinel(tt.give), "Sentinel")
			assert.Equal(t, tt.wantAddr, Addr(tt.give), "Addr")
		})
	}
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"10.0.0.1:7000"}})
	defer cluster.Close()
	assert.False(t, Sentinel(cluster), "Sentinel of a Cluster client")
	// Never asked for a slot map here: its sentinel's goroutines would outlive Close.
	failoverCluster := redis.NewFailoverClusterClient(&redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{"10.0.0.1:26379"}})
	defer failoverCluster.Close()
	assert.True(t, Sentinel(failoverCluster), "Sentinel of NewFailoverClusterClient's client")
}

func TestNoMaster(t *testing.T) {
	// As go-redis v9.23's failover client says it (sentinel.go, MasterAddr).
	unreachable := func(errs ...error) error {
		return fmt.Errorf("redis: all sentinels specified in configuration are unreachable: %w", errors.Join(errs...))
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name string
		give error
		want bool
	}{
		{"sentinels that know no such master", unreachable(redis.Nil, redis.Nil), true},
		{"one of them down", unreachable(refused, redis.Nil), true},
		{"wrapped by a retry", fmt.Errorf("%w (3 attempts)", unreachable(redis.Nil)), true},
		{"every sentinel down", unreachable(refused, refused), false},
		{"a key's absence", redis.Nil, false},
		{"a key's absence, wrapped", fmt.Errorf("get: %w", redis.Nil), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NoMaster(tt.give); got != tt.want {
				t.Errorf("NoMaster(%v) = %v; want %v", tt.give, got, tt.want)
			}
		})
	}
}
