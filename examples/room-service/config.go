package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/drainkit/drainkit/examples/room-service/internal/room"
	"github.com/drainkit/drainkit/lease"
	"github.com/drainkit/drainkit/lifecycle"
)

// config is the service's own environment; lifecycle.ConfigFromEnv reads
// the drain's (DRAIN_TIMEOUT, DRAIN_DELAY, HEALTH_READY_TIMEOUT, …).
//
// Redis is named by a URL, as go-redis parses it, so that credentials and
// TLS come with the address. The older REDIS_ADDR (host:port) is refused
// with exit 78 instead of being kept as an alias: one way to say where
// Redis is, and a deployment that still sets it learns so at its first
// start instead of silently running on the embedded in-memory server.
type config struct {
	GRPCAddr   string        // GRPC_ADDR, default :13001
	AdminAddr  string        // ADMIN_ADDR, default :13002
	Advertise  string        // ADVERTISE_ADDR: where other nodes forward rooms; default GRPC_ADDR with the host filled in
	Redis      redisTarget   // REDIS_URL, REDIS_SENTINEL_URL or REDIS_CLUSTER_URL (redisurl.go); none: an embedded development server
	LeaseTTL   time.Duration // LEASE_TTL, default lease.DefaultTTL, or sentinelLeaseTTL with REDIS_SENTINEL_URL
	HandOffMax int           // HANDOFF_CONCURRENCY, default 8: rooms flushed at once during a drain
	SQL        sqlTargets    // MYSQL_DSN (snapshots), ANALYTICS_DSN (reported only); mysql.go
	// BalanceInterval is BALANCE_INTERVAL, default DefaultBalanceInterval:
	// how often this node publishes its load and may hand one room off to
	// a better node (balance.go); 0 turns balancing off.
	BalanceInterval time.Duration
	// SnapshotInterval is SNAPSHOT_INTERVAL, default
	// room.DefaultSnapshotInterval: how often changed rooms are snapshotted.
	// The room loop's liveness budget is three of them.
	SnapshotInterval time.Duration
	// WaitReplicas is REDIS_WAIT_REPLICAS, default 0: how many replicas
	// must have a command before it is acknowledged
	// (room.Config.WaitReplicas), and a room's acquisition before it is
	// used (lease.Config.WaitReplicas), and an event before it is
	// published. Not on by default: while fewer replicas are connected,
	// every command then fails as of unknown outcome (and is resent), which
	// after a failover of a primary with one replica lasts until the old
	// primary replicates again, and with no replica for good
	// (docs/leases.md, "Guarantees").
	WaitReplicas int
}

// sentinelLeaseTTL is LEASE_TTL's default with REDIS_SENTINEL_URL: a
// Sentinel failover names the new primary about a second after promoting
// it, and at lease.DefaultTTL every session would end with it
// (docs/leases.md, "On Redis Sentinel").
const sentinelLeaseTTL = 3 * time.Second

// minSnapshotInterval keeps snapshot writes from crowding out commands.
const minSnapshotInterval = 100 * time.Millisecond

// withDefault is getenv's value of k, or def when it is empty.
func withDefault(getenv func(string) string, k, def string) string {
	if v := getenv(k); v != "" {
		return v
	}
	return def
}

// configError names an environment variable and the value refused; main
// exits with lifecycle.ExitConfig on it. A credential in the value is
// redacted before it gets here.
type configError struct {
	Field, Value, Problem string
}

func (e *configError) Error() string {
	return fmt.Sprintf("room-service: %s=%q: %s", e.Field, e.Value, e.Problem)
}

// loadConfig reads the service's variables through getenv (os.Getenv in
// main), and the lifecycle's with this service's SERVICE_NAME default.
func loadConfig(getenv func(string) string) (config, lifecycle.Config, error) {
	lc, err := lifecycle.ConfigFromEnv(func(k string) string {
		if k == "SERVICE_NAME" {
			return withDefault(getenv, k, "room-service")
		}
		return getenv(k)
	})
	if err != nil {
		return config{}, lifecycle.Config{}, err
	}
	c := config{
		GRPCAddr:   withDefault(getenv, "GRPC_ADDR", ":13001"),
		AdminAddr:  withDefault(getenv, "ADMIN_ADDR", ":13002"),
		LeaseTTL:   lease.DefaultTTL,
		HandOffMax: 8,

		BalanceInterval:  DefaultBalanceInterval,
		SnapshotInterval: room.DefaultSnapshotInterval,
	}
	for _, a := range []struct{ env, v string }{{"GRPC_ADDR", c.GRPCAddr}, {"ADMIN_ADDR", c.AdminAddr}} {
		if _, _, err := net.SplitHostPort(a.v); err != nil {
			return config{}, lifecycle.Config{}, &configError{Field: a.env, Value: a.v, Problem: "not host:port"}
		}
	}
	if c.Redis, err = redisFromEnv(getenv); err != nil {
		return config{}, lifecycle.Config{}, err
	}
	if c.SQL, err = sqlFromEnv(getenv); err != nil {
		return config{}, lifecycle.Config{}, err
	}
	if c.Redis.env == envSentinelURL {
		c.LeaseTTL = sentinelLeaseTTL
	}
	if v := getenv("REDIS_WAIT_REPLICAS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return config{}, lifecycle.Config{}, &configError{Field: "REDIS_WAIT_REPLICAS", Value: v, Problem: "want 0 (acknowledge what the primary applied) or a positive integer"}
		}
		c.WaitReplicas = n
		if n > 0 && c.Redis.client == nil {
			return config{}, lifecycle.Config{}, &configError{Field: "REDIS_WAIT_REPLICAS", Value: v,
				Problem: "the embedded development Redis has no replica, so every command would fail: set REDIS_URL, REDIS_SENTINEL_URL or REDIS_CLUSTER_URL"}
		}
	}
	if v := getenv("LEASE_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < lease.MinTTL {
			return config{}, lifecycle.Config{}, &configError{Field: "LEASE_TTL", Value: v, Problem: fmt.Sprintf("want a duration of at least %s", lease.MinTTL)}
		}
		c.LeaseTTL = d
	}
	if v := getenv("HANDOFF_CONCURRENCY"); v != "" {
		n, err := strconv.Atoi(v) // the whole value: "8x" is not 8
		if err != nil || n < 1 {
			return config{}, lifecycle.Config{}, &configError{Field: "HANDOFF_CONCURRENCY", Value: v, Problem: "want a positive integer"}
		}
		c.HandOffMax = n
	}
	if v := getenv("BALANCE_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || (d != 0 && d < minBalanceInterval) {
			return config{}, lifecycle.Config{}, &configError{Field: "BALANCE_INTERVAL", Value: v, Problem: fmt.Sprintf("want 0 (off) or a duration of at least %s", minBalanceInterval)}
		}
		c.BalanceInterval = d
	}
	if v := getenv("SNAPSHOT_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < minSnapshotInterval {
			return config{}, lifecycle.Config{}, &configError{Field: "SNAPSHOT_INTERVAL", Value: v, Problem: fmt.Sprintf("want a duration of at least %s", minSnapshotInterval)}
		}
		c.SnapshotInterval = d
	}
	c.Advertise = getenv("ADVERTISE_ADDR")
	if c.Advertise == "" {
		c.Advertise = advertised(c.GRPCAddr)
	}
	return c, lc, nil
}

// advertised fills in the host of a listen address such as ":13001", so
// other nodes can dial it: the host name, as a Kubernetes StatefulSet or
// a compose service resolves it. Set ADVERTISE_ADDR (e.g. from the pod IP)
// where host names do not resolve.
func advertised(listen string) string {
	host, port, _ := net.SplitHostPort(listen)
	if host == "" || host == "0.0.0.0" || host == "::" {
		host, _ = os.Hostname()
	}
	return net.JoinHostPort(host, port)
}
