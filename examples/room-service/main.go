// Command room-service is a gRPC room service on drainkit, in the shape of
// the service health-check guide: each room is a cell owned through the
// lease room:route:{room_id}; commands are acknowledged only after a fenced
// append to the room's log in Redis; snapshots are written periodically and
// on drain; an outbox worker publishes room events to a stream.
//
// A drain follows drainkit's timeline: readiness and gRPC health flip and
// the lease gate closes at SIGTERM; after DRAIN_DELAY gRPC intake stops and
// the outbox stops fetching; in-flight RPCs and the outbox batch finish;
// each room is flushed and its lease released one by one, for at most half
// of DRAIN_TIMEOUT − DRAIN_DELAY (a room not flushed by then is left to
// expire), so that a hung snapshot store leaves the rest of the drain its
// time; the node's lease session ends, which frees every room left; the
// loops and Redis close.
//
// Environment: SERVICE_NAME (room-service), NODE_ID, GRPC_ADDR (:13001),
// ADMIN_ADDR (:13002), ADVERTISE_ADDR, one of REDIS_URL,
// REDIS_SENTINEL_URL, REDIS_CLUSTER_URL (redisurl.go; none: embedded, for
// development), LEASE_TTL (1s, 3s with REDIS_SENTINEL_URL: a crashed node's rooms are free within it; docs/leases.md), HANDOFF_CONCURRENCY (8), BALANCE_INTERVAL
// (1s; 0 turns off moving rooms towards their preferred nodes),
// SNAPSHOT_INTERVAL (5s; the room loop's liveness budget is three),
// REDIS_WAIT_REPLICAS (0; replicas that must have a command before it is
// acknowledged, docs/leases.md "Guarantees"), DRAIN_TIMEOUT,
// DRAIN_DELAY, HEALTH_READY_TIMEOUT. go-redis's own log lines join the
// service's JSON log.
//
// Snapshots live in MySQL when MYSQL_DSN is set (a go-sql-driver/mysql DSN,
// user:password@tcp(host:3306)/rooms; the schema is created at start and a
// newer one is refused), in Redis otherwise; the command log is always in
// Redis. ANALYTICS_DSN names an optional database that readiness reports
// but never gates on. Ready, check by check (/healthz/ready?verbose=1):
// mysql (PingContext, 300 ms, gating, with MYSQL_DSN), redis (PING, 200 ms,
// gating), redis_lease (the lease probe, gating), grpc_listener (gating),
// analytics (PingContext, 300 ms, informational, with ANALYTICS_DSN).
// MYSQL_MAX_OPEN_CONNS (16) bounds each database's connection pool.
package main

import (
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"
	"google.golang.org/grpc"

	"github.com/drainkit/drainkit/examples/room-service/roompb"

	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/fxmodule/fxgrpc"
	"github.com/drainkit/drainkit/fxmodule/fxlease"
	"github.com/drainkit/drainkit/lease"
	"github.com/drainkit/drainkit/lifecycle"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	slog.SetDefault(log)
	c, lc, err := loadConfig(os.Getenv)
	if err != nil {
		log.Error("bad configuration", "err", err)
		os.Exit(lifecycle.ExitConfig)
	}
	redis.SetLogger(newRedisLog(log.With("service", lc.Service, "node_id", lc.NodeID), c.Redis))
	os.Exit(fxmodule.Run(options(c, lc, log)...))
}

func options(c config, lc lifecycle.Config, log *slog.Logger) []fx.Option {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return []fx.Option{
		fxmodule.Module,
		fxlease.Module,
		// fx's OnStop hooks (closing the Redis client) get 5 s after the
		// drain: DRAIN_TIMEOUT + 5 s fits the pod's grace period.
		fx.StopTimeout(5 * time.Second),
		fx.Supply(c, lc, log, reg),
		fx.Provide(func() prometheus.Registerer { return reg }), // also /metrics

		// roomHooks hands rooms off (flushed before they move), so the
		// Release hook leaves an unflushed room to expire.
		// WaitReplicas: a room acquired on a primary that a failover then
		// discards would have two owners until the first one's fence is refused.
		fx.Supply(lease.Config{Addr: c.Advertise, TTL: c.LeaseTTL, WaitReplicas: c.WaitReplicas, OnEnd: func(l *lease.Lease, cause error) {
			leaseEvent(log.With("service", lc.Service, "node_id", lc.NodeID), "ended", l, cause)
		}}),
		fx.Provide(newRedis, newRooms, newWatcher),
		fx.Provide(fxmodule.AsHook((*watcher).hook)),
		fx.Provide(fxmodule.AsCheck(redisCheck)),
		sqlOptions(c), // MYSQL_DSN, ANALYTICS_DSN
		fx.Provide(fxmodule.AsHook(roomHooks)),
		fxgrpc.Server("grpc", c.GRPCAddr, registerRooms),
		// Probes and scrapes, answered through the drain, closed last.
		fxmodule.Admin(c.AdminAddr),
		fx.Invoke(serve),
	}
}

// registerRooms puts the Rooms API on the gRPC server that fxgrpc.Server
// wires (in-flight tracking, grpc.health.v1, listener, drain hooks).
func registerRooms(s *grpc.Server, r *rooms, w *watcher) {
	roompb.RegisterRoomsServer(s, r.svc)
	roompb.RegisterRoomEventsServer(s, w)
}
