// Package readiness answers liveness and readiness probes for a drainkit
// service, over HTTP ([Registry.Mount]) and, through package grpchealth,
// over grpc.health.v1. Liveness decides whether the platform restarts the
// process and readiness whether a load balancer sends it traffic, so the two
// never share a check. docs/readiness.md explains why it works as it does.
//
// # Liveness
//
// The live probe looks only at the process: heartbeats that main loops beat
// ([Registry.Heartbeat]), never a dependency, which a restart cannot fix.
// Heartbeats fail it only while Running, and only for time the process was
// seen running, so a pause of the whole process is not a stuck loop.
//
// # Readiness and tiers
//
// [Registry.Ready] is ok only when the lifecycle state is Running and every
// [Gating] check passes. Any other state, or a closed registry, answers
// fail at once without running a check. A failing [Informational] check
// answers "degraded", still ready and listed, so that a shared dependency
// does not take every replica out of rotation in the same second.
//
// # Timeouts and caching
//
// Checks run concurrently, each under its own timeout and all under
// [Config.ReadyTimeout]. A check that overruns or panics is a failure, and a
// hung check is never started twice. Concurrent probes share one
// evaluation, whose results answer for [Config.CacheTTL] (a fifth of it when
// a gating check failed). Expired results are answered while they refresh.
// [Registry.Close] waits for every goroutine the registry started.
//
// # Observability
//
// Transitions, not probes, are logged. The health_* metrics are updated as
// probes are answered, so a scrape never runs a check. Error texts are cut
// short and stripped of credentials before they reach a body, a log line or
// a metric.
//
// # HTTP
//
// [Registry.Mount] serves [LivePath] and [ReadyPath]. The paths are fixed,
// so that no service can wire liveness to the ready handler.
//
// # Ready-made checks
//
// [Listener] checks this process's own listener. Packages redischeck,
// sqlcheck and grpchealth hold the checks of a dependency, so that
// readiness links no client library a service does not use.
package readiness
