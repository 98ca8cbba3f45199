// Package lease gives a node exclusive ownership of rooms through Redis
// leases (room:route:{ID}), with fencing tokens, one batched renewer per
// node, lost-lease signals before expiry, a drain gate and the per-room
// hand-off of the drain. It works through redis.UniversalClient:
// standalone, Sentinel and Cluster (not Ring, which moves the keys of an
// unreachable shard to another). docs/leases.md holds the algorithm,
// the budgets, the safety argument and what Redis alone does not
// guarantee.
//
// # Client settings
//
// A lease call must end within CallTimeout (TTL/6) and be sent at most
// twice, or a renewal could land after the lease expired. [New] refuses,
// in one error listing each option with its value, a client that retries
// more than once or whose socket timeouts exceed CallTimeout while it
// ignores context deadlines. So a client for leases is, for example:
//
//	redis.NewClient(&redis.Options{Addr: addr, MaxRetries: 1, ContextTimeoutEnabled: true})
//
// # Use
//
// [New] and [Manager.Start]; [Manager.Acquire] a room and pass
// [Lease.Token] with every write, so storage refuses a stale owner; work
// under [Lease.Context], which ends when the lease does. For the drain,
// add [Manager.HandOff] (flush, then release, room by room) and
// [Manager.ReleaseHook] to the drain's hooks, and call [Manager.BeginDrain]
// at the flip, so that no lease is acquired after it. fxlease does all of
// it but the hand-off, whose fn is the service's.
//
// # Metrics
//
// room_leases_held, room_lease_acquired_total, room_lease_renewed_total,
// room_lease_lost_total, room_lease_released_total,
// room_lease_left_to_expire_total, room_lease_renew_duration_ms,
// room_lease_check_failures_total and room_node_heartbeat_failures_total,
// on [Config].Registerer, each labelled route_prefix. Managers with their
// own RoutePrefix share a Registerer and a drain: the hooks are named
// after it ("lease-release(room:route:)").
package lease
