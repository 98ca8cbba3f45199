// Package e2e is the end-to-end harness shared by the scenario tests
// (./e2e) and the demo (./examples/rolling-update): room-service and
// gateway as separate processes on loopback against one Redis, a load
// balancer in front of the gateways, a bounded load and a checker.
//
// # Slots
//
// Every instance listens on one of a fixed list of addresses, one more
// than run at once; gateways get every room-service slot in
// ROOM_GRPC_ADDRS and the balancer every gateway slot, so nothing is
// reconfigured during a rolling update: the new instance starts on the
// free slot, the old one drains, its slot becomes the free one. Slots with
// nothing listening are skipped by grpc-go's health-checked round_robin and
// by the balancer's health checks.
//
// # Balancer
//
// HAProxy (probe GET /healthz/ready every [harness.ProbeInterval],
// [harness.ProbeFall] failures in a row take a gateway out, as the deploy
// manifests' readiness failureThreshold does, one success puts it back;
// retries only a connection failure before the request was sent,
// redispatched to another gateway, never a gateway's 503; its own 503
// carries Retry-After), or, for the demo when HAProxy is not installed,
// [harness.InProcess] with the same rules. The processes, the balancers
// and the open-loop load are package harness's, shared with the drill
// (cmd/drainkit); what is here knows rooms, gateways and leases.
//
// # One node cut off from Redis
//
// [Cluster.StartRedisProxy] starts a [HoldProxy] to the cluster's Redis and
// [Cluster.StartRoomVia] starts a room-service whose REDIS_URL points at
// it; HoldProxy.Hold then cuts that node off from Redis (its connections
// hang, they are neither reset nor refused) while its gRPC and admin ports
// answer as before, and HoldProxy.Forward heals the partition.
//
// # Load and checks
//
// [Load] sends a fixed rate for a bounded time, each command once with a
// Request-Timeout, never retried (any answer but 200 is a failure: a 503
// with Retry-After says nothing was applied, a 502, 504 or a reset after
// the request was written has no definite answer), and records every
// answer and its latency. [Check] reads every room back and checks that
// every acknowledged command is in its room exactly once at the
// acknowledged seq and was acknowledged as "applied", and,
// from the room-services' "lease event" log lines, that no two nodes held
// a room at once and that fences only increased; it measures the
// hand-over gap (one node's end of a room to the next node's
// acquisition).
package e2e
