package readiness

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Timeouts of the ready-made checks, from the health-check guide's budget.
const (
	DefaultRedisTimeout    = 200 * time.Millisecond
	DefaultSQLTimeout      = 300 * time.Millisecond
	DefaultGRPCTimeout     = 300 * time.Millisecond
	DefaultListenerTimeout = 100 * time.Millisecond
)

// The ready-made checks below are gating with the guide's timeout. Each
// returns a plain Check, so a caller overrides what it needs before Add:
//
//	c := readiness.RedisPing(cache)
//	c.Name, c.Tier = "cache", readiness.Informational

// RedisPing checks a Redis server (standalone, Sentinel or Cluster) with PING.
func RedisPing(client redis.UniversalClient) Check {
	return Check{Name: "redis", Tier: Gating, Timeout: DefaultRedisTimeout,
		Probe: func(ctx context.Context) error { return client.Ping(ctx).Err() }}
}

// SQLPing checks a database with PingContext, which opens a connection if
// the pool has none; it runs no query.
func SQLPing(db *sql.DB) Check {
	return Check{Name: "sql", Tier: Gating, Timeout: DefaultSQLTimeout,
		Probe: db.PingContext}
}

// GRPCHealth checks a downstream service's grpc.health.v1 status for
// service: anything but SERVING fails. The check is named after service
// (or "grpc" for the whole server, service "").
func GRPCHealth(conn grpc.ClientConnInterface, service string) Check {
	name := service
	if name == "" {
		name = "grpc"
	}
	client := healthpb.NewHealthClient(conn)
	return Check{Name: name, Tier: Gating, Timeout: DefaultGRPCTimeout,
		Probe: func(ctx context.Context) error {
			resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
			if err != nil {
				return err
			}
			if resp.Status != healthpb.HealthCheckResponse_SERVING {
				return fmt.Errorf("status %s", resp.Status)
			}
			return nil
		}}
}

// Listener checks that this process's own listener at addr accepts a TCP
// connection, e.g. Listener(":8080"). It only connects and closes.
func Listener(addr string) Check {
	return Check{Name: "listener " + addr, Tier: Gating, Timeout: DefaultListenerTimeout,
		Probe: func(ctx context.Context) error {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return err
			}
			return c.Close()
		}}
}
