// Package readiness answers liveness and readiness probes for a drainkit
// service: over HTTP (/healthz/live, /healthz/ready, through
// [Registry.Mount]) and over gRPC (grpc.health.v1, through package
// grpchealth).
//
// Readiness decides whether a load balancer sends this process traffic;
// liveness decides whether the platform restarts it. Getting either wrong
// turns a small fault into an outage, so the two never share a check.
//
// # Liveness
//
// The live probe looks only at the process itself: watchdogs that main
// loops (room manager, outbox worker, consumer) beat, registered with
// [Registry.Heartbeat]. It never checks a dependency: a restart cannot fix
// a dead database, and restarting every replica during its outage is a
// restart storm. Heartbeats are judged only while Running: liveness stays
// 200 while the process starts and while it drains.
//
// Watchdogs judge progress, not wall time. A heartbeat's gap is counted in
// the time the registry saw the process run: its clock (one goroutine, from
// the flip to Running until Close or the drain) ticks every 100 ms, and a
// tick that comes late adds at most 200 ms, so a pause of the whole process
// is not a stuck loop. A loop waiting on a failing dependency stays alive as
// long as each call has a deadline shorter than its gap and it beats between
// attempts.
//
// # Readiness and tiers
//
// [Registry.Ready] is ok only when the lifecycle state (read through the
// function given to [New], such as a lifecycle.Manager's State method) is
// Running and every [Gating] check passes. Starting and Draining answer 503 at once, without
// running a check: the state is read on every probe, so the first probe
// after the flip already fails, even with a fresh cached "ok".
//
// Checks come in two tiers: a [Gating] check
// is a hard dependency of this replica (its database); its failure takes the
// replica out of rotation. An [Informational] check is an optional or shared
// dependency (a shared cache, an external IM service): gating on it would make
// every replica unready in the same second, turning a survivable degradation
// into a total outage. Its failure answers 200 with status "degraded" and is
// listed in the body, logs and metrics: a failure is never hidden. Where it
// is unclear whether a dependency is primary, register it as gating.
//
// # Timeouts, caching and hung checks
//
// Checks run concurrently, each under its own timeout ([DefaultCheckTimeout]
// unless set) counted from the moment its Probe is called, the whole
// evaluation under [Config.ReadyTimeout], which also bounds a check whose
// goroutine a starved process runs late. A check that overruns is reported
// failed with "deadline exceeded" and hides no other check's result. A
// panicking check is a failure, not a crash.
//
// Every setting is a field of [Config], the logger and the metrics
// registerer included, as in each drainkit package: there are no
// functional options, and [Config.Validate] names the field and the value
// it refuses.
//
// Results are reused for [Config.CacheTTL], or a fifth of it when a gating
// check failed: while the replica is out of the balancer and requests wait
// for it, its dependency's recovery is seen within 200 ms (by default)
// rather than up to a second later, at the price of at most five checks a
// second of the failing dependency while something probes. Concurrent probes share one
// evaluation, which the registry owns: a prober that disconnects does not
// cancel it. When results expire, the probe that notices starts a refresh
// and answers from the previous results, with their age; so do probes
// arriving while it runs: no probe queues behind a refresh. Two cases wait
// for the refresh (at most ReadyTimeout): the very first evaluation, and a
// probe after a quiet spell, when the last results are older than twice
// CacheTTL (a kubelet probing every 10 s then gets a fresh answer, not one
// 10 s old); results that old are never answered with.
//
// A check still running from an earlier evaluation is never started again:
// later evaluations wait on the same call and report its age, so a check
// that ignores its context costs one goroutine, once. [Registry.Close]
// cancels running checks and waits for every goroutine the registry started.
//
// # Observability
//
// Transitions, not probes, are logged, with the fields service, node_id,
// old_status, new_status, failed_check, reason and duration_ms. Not ready
// while starting or draining is expected and logged at Info. Metrics:
// health_ready_status, health_live_status, health_check_duration_ms{check}
// and health_dependency_failures_total{check,tier}; they are updated when
// probes are answered, so a scrape never runs a check.
//
// # HTTP
//
// [Registry.Mount] is the one way to serve the probes over HTTP. It takes
// the paths out of the service's hands: every service answers at
// [LivePath] and [ReadyPath], where every probe and manifest looks, and no
// service can wire liveness to the ready handler, the mistake that
// restarts every replica during a dependency's outage. A service with
// another router mounts the ServeMux on it: an [http.ServeMux] is an
// [http.Handler].
//
// # Ready-made checks
//
// [Listener] checks this process's own listener. The checks of a
// dependency live in packages of their own, so that readiness links no
// client library a service does not use: redischeck.Ping (Redis PING),
// sqlcheck.Ping (database/sql PingContext) and grpchealth.Check (a
// downstream grpc.health.v1 service). Each returns a gating [Check] with
// the timeout its dependency needs; a caller changes its Name or Tier
// before [Registry.Add].
//
// Every check's error text is cut short and stripped of credentials (the
// user:password@ of URLs and DSNs, password=… pairs) before it reaches a
// body, a log line or a metric, so a check returns its error as it is.
//
// # gRPC
//
// Package grpchealth keeps a grpc-go health server in step with a
// Registry for the service name and "": NOT_SERVING while starting,
// SERVING when ready, NOT_SERVING from the flip on, latched; and it ends
// Watch streams before GracefulStop so that probers do not hold the server
// up.
package readiness
