// Package lease gives a node exclusive ownership of rooms through Redis
// leases (room:route:{ID}), with fencing tokens, one batched renewer per
// node, lost-lease signals before expiry, a drain gate and the per-room
// hand-off of the drain, over a standalone, Sentinel or Cluster client.
// docs/leases.md holds the algorithm, the budgets, the safety argument and
// what Redis alone does not guarantee.
//
// # Client settings
//
// A lease call must end within CallTimeout (TTL/6) and be sent at most
// twice, or a renewal could land after the lease expired. [New] refuses,
// naming each option, a client that retries more than once or whose
// socket timeouts exceed CallTimeout while it ignores context deadlines:
//
//	redis.NewClient(&redis.Options{Addr: addr, MaxRetries: 1, ContextTimeoutEnabled: true})
//
// # Use
//
// [New] and [Manager.Start]; [Manager.Acquire] a room and pass
// [Lease.Token] with every write; work under [Lease.Context], which ends
// with the lease. For the drain, call [Manager.BeginDrain] at the flip and
// add [Manager.HandOff] and [Manager.ReleaseHook] to the drain's hooks.
// fxlease does all of it but the hand-off, whose fn is the service's.
//
// # Metrics
//
// The room_lease_* and room_node_heartbeat_failures_total series listed
// in docs/reference.md, on [Config].Registerer, labelled route_prefix.
// Managers with their own RoutePrefix can share a Registerer and a drain.
package lease
