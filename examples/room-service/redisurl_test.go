package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/drainkit/drainkit/internal/redischeck"
	"github.com/drainkit/drainkit/lease"
)

func TestRedact(t *testing.T) {
	tests := []struct {
		give, want string
	}{
		{"redis://127.0.0.1:6379", "redis://127.0.0.1:6379"},
		{"redis://app:s3cret@127.0.0.1:6379/2", "redis://app:***@127.0.0.1:6379/2"},
		{"rediss://:s3cret@redis.example:6380", "rediss://:***@redis.example:6380"},
		{"redis://app:p%40ss%2Fw@h:1", "redis://app:***@h:1"},
		{"redis://app@h:1", "redis://app@h:1"}, // a user without a password
		{"redis://s:sp@h:26379?master_name=m&password=mp&addr=h2:26379", "redis://s:***@h:26379?master_name=m&password=***&addr=h2:26379"},
		{"redis://h:26379?Password=mp&sentinel_password=sp", "redis://h:26379?Password=***&sentinel_password=***"},
		{"redis://app:s3cret@n1:6379?addr=n2:6379&addr=n3:6379", "redis://app:***@n1:6379?addr=n2:6379&addr=n3:6379"},
		// After a '#' the parameter is in the fragment: go-redis ignores it, a log line would not.
		{"redis://h:1?#&password=s3cret", "redis://h:1?#&password=***"},
		// What url.Parse rejects or misreads is redacted as text.
		{"redis://app:s3/cret@h:1", "redis://app:***@h:1"},
		{"redis://app:s3 cret@h:1", "redis://app:***@h:1"},
		{"app:s3cret@h:1", "app:***@h:1"},
		{"unix://app:s3cret@/run/redis.sock", "unix://app:***@/run/redis.sock"},
		{"unix:///run/redis.sock?password=s3cret", "unix:///run/redis.sock?password=***"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			if got := redact(tt.give); got != tt.want {
				t.Errorf("redact(%q) = %q; want %q", tt.give, got, tt.want)
			}
		})
	}
}

func TestScrub(t *testing.T) {
	tests := []struct {
		name, raw string
		give      string // text that quotes a password
	}{
		{"as written", "redis://app:s3cret@h:1", "AUTH app s3cret"},
		{"decoded", "redis://app:p%40ss@h:1", "AUTH app p@ss"},
		{"query", "redis://h:26379?master_name=m&password=mp%2B1", "AUTH mp+1"},
		{"malformed", "redis://app:s3/cret@h:1", "AUTH app s3/cret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := redisTarget{secrets: secrets(tt.raw)}
			got := target.scrub(tt.give)
			if !strings.Contains(got, "***") {
				t.Errorf("scrub(%q) = %q; want the password as ***", tt.give, got)
			}
			for _, p := range target.secrets {
				if strings.Contains(got, p) {
					t.Errorf("scrub(%q) = %q; still holds %q", tt.give, got, p)
				}
			}
		})
	}
}

func TestScrubErrKeepsIdentity(t *testing.T) {
	target := redisTarget{secrets: secrets("redis://app:s3cret@h:1")}
	if err := target.scrubErr(redis.Nil); err != redis.Nil {
		t.Errorf("scrubErr(redis.Nil) = %v; want redis.Nil itself", err)
	}
	base := errors.New("dial app:s3cret")
	err := target.scrubErr(base)
	if got := err.Error(); got != "dial app:***" {
		t.Errorf("scrubErr text %q; want %q", got, "dial app:***")
	}
	if !errors.Is(err, base) {
		t.Errorf("scrubErr(base) is not base: callers could no longer match it")
	}
}

// TestRedisURLsDialOncePerCall: a client built from any of the three URLs
// dials once per call unless the URL says otherwise, so a refused
// connection says so and a Cluster client's slot map reload passes a dead
// primary at once (go-redis dials 5 times, 100 ms apart, by default).
func TestRedisURLsDialOncePerCall(t *testing.T) {
	tests := []struct {
		env, raw string
		want     int
	}{
		{envURL, "redis://127.0.0.1:1", 1},
		{envSentinelURL, "redis://127.0.0.1:1?master_name=m", 1},
		{envClusterURL, "redis://127.0.0.1:1", 1},
		{envClusterURL, "redis://127.0.0.1:1?dialer_retries=3", 3},
		{envClusterURL, "redis://127.0.0.1:1?dialer_retries=-1", 1}, // go-redis would read -1 as its default, 5
	}
	for _, tt := range tests {
		target, err := parseRedis(tt.env, tt.raw)
		if err != nil {
			t.Fatalf("parseRedis(%s, %q): %v", tt.env, tt.raw, err)
		}
		c := target.client()
		var got int
		switch c := c.(type) {
		case *redis.Client:
			got = c.Options().DialerRetries
		case *redis.ClusterClient:
			got = c.Options().DialerRetries
		}
		_ = c.Close()
		if got != tt.want {
			t.Errorf("%s=%s: DialerRetries %d; want %d", tt.env, tt.raw, got, tt.want)
		}
	}
}

// TestClusterURLBoundsTheSlotMapReload: go-redis reloads a Cluster's slot
// map without a context, waiting ReadTimeout (DialTimeout to connect) for
// a node that does not answer; REDIS_CLUSTER_URL's client keeps both under
// what lease warns of (TTL/2) unless the URL sets them.
func TestClusterURLBoundsTheSlotMapReload(t *testing.T) {
	tests := []struct {
		raw        string
		read, dial time.Duration
		warns      bool // lease's Start warns of it, at the shortest TTL
	}{
		{"redis://127.0.0.1:1", clusterReadTimeout, clusterDialTimeout, false},
		{"redis://127.0.0.1:1?read_timeout=2s&dial_timeout=3s", 2 * time.Second, 3 * time.Second, true},
	}
	for _, tt := range tests {
		target, err := parseRedis(envClusterURL, tt.raw)
		if err != nil {
			t.Fatalf("parseRedis(%s, %q): %v", envClusterURL, tt.raw, err)
		}
		c := target.client().(*redis.ClusterClient)
		o, warning := c.Options(), redischeck.ReloadWarning(c, lease.MinTTL/2)
		_ = c.Close()
		if o.ReadTimeout != tt.read || o.DialTimeout != tt.dial {
			t.Errorf("%s=%s: ReadTimeout %s, DialTimeout %s; want %s, %s", envClusterURL, tt.raw, o.ReadTimeout, o.DialTimeout, tt.read, tt.dial)
		}
		if got := warning != ""; got != tt.warns {
			t.Errorf("%s=%s: lease warns %v (%q); want %v", envClusterURL, tt.raw, got, warning, tt.warns)
		}
	}
}
