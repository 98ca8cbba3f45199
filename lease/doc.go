// Package lease gives a room-service node exclusive ownership of rooms
// through Redis leases, with fencing tokens, one batched renewer per node,
// lost-lease signals before expiry, a drain gate and per-room hand-off.
//
// It works through redis.UniversalClient: standalone, Sentinel and
// Cluster.
//
// # Client settings
//
// A lease call must end within CallTimeout (TTL/6: 1.666s with the
// default TTL) and be sent at most twice, or a renewal could land after
// the lease expired. go-redis's defaults do not: [New] refuses them, for
// a *redis.Client (standalone, Sentinel), *redis.ClusterClient or
// *redis.Ring, in one error that lists each option with its value:
//
//   - MaxRetries at most 1 (go-redis reads 0 as 3, -1 as none);
//   - ContextTimeoutEnabled true, so that each call's deadline bounds it;
//     or else ReadTimeout and WriteTimeout above 0 and at most CallTimeout
//     (go-redis's default is 5s).
//
// So a client for leases is, for example:
//
//	redis.NewClient(&redis.Options{Addr: addr, MaxRetries: 1, ContextTimeoutEnabled: true})
//
// Dialing and waiting for a pooled connection already end with the
// call's context; the pool, TLS and credentials are the client's own.
// New checks the client rather than building one of its own from the
// options: a second pool would open more connections, and the hooks added
// to the team's client (tracing, metrics) would be left out. A client of
// another type is used as it is. The error, like every error of New and
// [Config.Validate], matches lifecycle.ErrConfig.
//
// # Keys
//
// A room id is the hash tag of its keys, so every script touches one
// Cluster slot:
//
//   - room:route:{ID} holds node|holder|fence with a PX TTL: the lease.
//     holder is random per [Manager], so a restarted process never takes
//     an old lease for its own.
//   - room:fence:{ID} is the fencing counter (kept 24 h after its last use).
//   - room:node:{NODE} is the node heartbeat, a hash with holder, state
//     (active or draining) and addr (where to forward), with the lease TTL.
//
// The prefixes are configurable ([Config]).
//
// # Algorithm
//
// Acquire runs one Lua script: if the route key is missing it issues a
// fence and sets the key with the TTL; if the key holds this Manager's
// value it takes it over with a new fence; anything else, parseable or not,
// is someone else's and is never overwritten (Acquire's error matches
// [ErrHeld]).
//
// The fence is INCR on the counter with a floor: before the INCR the
// counter is raised to the server's TIME in microseconds. If the counter is
// lost (failover before replication, eviction, deletion), the next fence
// still exceeds every earlier one, provided a room gets fewer than one
// fence per microsecond (each fence needs the previous lease gone, so it
// does) and the new primary's clock is not behind the old one's by more
// than the time since the last fence (NTP-synchronised servers).
//
// Acquire is one EVALSHA (the scripts are loaded at Start, in one pipeline
// per server) and Release one more: two round trips per acquire+release
// pair.
//
// An acquire attempt whose reply was lost (a timeout) may have taken the
// room. The next attempt takes it over with a new fence; but if the
// acquisition fails in the end, the key would hold this Manager's value
// under a fence nobody knows, and the room would have no usable owner for
// a TTL. So a failed acquisition deletes the key if it holds this
// Manager's node and holder, whatever the fence (compare-holder; safe
// because it runs only while this Manager holds no lease of the room, and
// one acquisition per room runs at a time, its clean-up included: an
// Acquire of the room arriving meanwhile waits for it). If Redis cannot be
// reached for that either, the key expires within TTL; the clean-up stops
// trying then, so such an Acquire waits at most about a TTL for it (within
// its ctx) before its own attempts begin.
//
// # Budgets
//
// CallTimeout bounds one call on a healthy server. A loaded machine or a
// busy server makes some calls slower, so a step with a budget of its own
// does not fail on one slow call: Start (the ctx given to it: fx's start
// timeout, say), Acquire, Release, Owner, Stop and the Release hook give
// each call CallTimeout and retry calls that timed out or lost their
// connection, with jittered backoff from CallTimeout/8 to CallTimeout,
// until the step's ctx ends (after TTL when ctx has no deadline; a
// release always tries once, but starts no retry after the key's expiry
// by its last confirmed renewal). Every retried call is safe
// to repeat. Renewal is the exception: a failed round is not retried
// within the round; the next tick (RenewInterval) is its retry, and the
// TTL·2/3 rule decides when a lease is given up.
//
// One renewer goroutine per Manager renews every held lease each
// RenewInterval (TTL/3) in one pipeline: one round trip per Redis node,
// with the node heartbeat in the same pipeline. The renew script is a
// batched compare-and-PEXPIRE: it takes up to 500 route keys with the
// values this Manager wrote and returns one status per key, 1 renewed,
// 0 gone, -1 taken; it never re-creates a missing key. A standalone or
// Sentinel client (*redis.Client) puts any leases in one call; a Cluster
// client only leases of one hash slot (a script may touch one slot), so on
// Cluster most calls carry few keys but the pipeline still costs one round
// trip per node; other clients (Ring, custom) send one lease per call. The
// 500-key cap keeps each script, which blocks the server while it runs,
// near a millisecond. A round costs about 2 to 3.5 µs per lease on
// loopback (10,000 leases in about 23 ms; 100,000 in 0.2 to 0.35 s in the
// benchmarks of BENCHMARKS.md), and must fit in CallTimeout (TTL/6): with
// the 1 s minimum TTL that leaves room for about 40,000 leases per
// Manager, with the default 10 s TTL far more. The drain's release is the
// same batched script with compare-and-DEL.
//
// # Safety argument
//
// Redis keeps the key at least TTL after the moment a confirmed renewal
// (or the acquire) was sent, because the server applies the PEXPIRE after
// that moment. The holder gives the lease up (context cancelled with
// [ErrLost], then [Config].OnLost) on a reply of 0 or -1 at once, and
// otherwise when the last confirmed renewal was sent TTL·2/3 ago. The
// renewer wakes at that deadline even while a call hangs, because each
// call's deadline is capped at it. So the holder stops at least TTL/3
// before any other node can acquire the room; that third absorbs clock rate
// differences and scheduling delay. Every call is bounded by CallTimeout
// (at most TTL/6) with at most one client retry, so a delayed renewal
// cannot land after the holder already gave up and confuse the accounting.
//
// Timing alone cannot stop a holder that pauses between checking its
// context and writing: the fence can. Storage that receives writes with
// [Lease.Token] and rejects tokens lower than the highest seen is safe even
// then.
//
// Release cancels the lease's context before the compare-and-DEL, so work
// under it stops before another node can take the room.
//
// # Guarantees
//
// On one Redis server that keeps its data (no eviction, no restart
// without persistence), at most one holder at a time believes it holds a
// room, within the clock assumptions above, and fences grow with every
// acquisition.
//
// Redis alone promises no more than that, and this package does not
// claim more:
//
//   - Replication is asynchronous. After a failover (Sentinel, Cluster)
//     the new primary may lack the latest acquisition, or the latest
//     renewals, so a second node can acquire a room whose holder still
//     believes it holds it: two owners until the holder's lease is lost.
//     [Config].WaitReplicas narrows this: an acquisition is returned only
//     once that many replicas have it, at the cost of a replication round
//     trip per acquisition (renewals are not waited for: a failover that
//     lost the last ones shortens the lease by up to RenewInterval).
//     WAIT does not make Redis strongly consistent: a failover may still
//     promote a replica that did not acknowledge.
//   - Lease keys have a TTL, so any maxmemory-policy but noeviction
//     (allkeys-* and volatile-* alike) may evict one under memory
//     pressure, and its room can get a second owner at once. Start refuses
//     such a server with [ErrUnsafeServer] naming the policy, unless
//     [Config].AcceptEviction is set.
//   - A restart without persistence loses every lease at once.
//
// What holds in every case is the fence: it is seeded from the server's
// clock, so a lost counter still yields larger tokens (see above), and
// storage that rejects tokens lower than the highest it has seen refuses
// the older owner's writes once the newer one has written. Use the fence
// wherever two owners would do harm.
//
// Start checks what it can on every server it writes leases to: the
// version (at least 5.0: acquire.lua reads TIME before writing), read
// from INFO server, and maxmemory-policy, read from INFO memory or else
// CONFIG GET. A managed Redis may refuse these; Start then logs a warning
// naming the setting it could not read and goes on.
//
// # Draining
//
// The gate closes at the lifecycle flip, the moment [Config].Draining
// reports true: Acquire returns [ErrDraining] from then on, an
// acquisition in progress starts no further attempt, and one whose script
// raced the flip is released and returns ErrDraining. The heartbeat is
// marked draining by the next write after that (at once under fxlease,
// which tells the renewer at the flip; otherwise at the first Acquire
// refused or the next renewal round, within RenewInterval).
//
// The hook from [Manager.HandOff] (phase Flush) runs a function per held
// lease (flush its snapshot) with bounded concurrency and releases each
// lease as soon as its own function succeeded. A lease whose function
// failed or ran out of time is left to expire: an unflushed room is never
// released, so the next owner recovers it from snapshot and command log
// with a higher fence. The hook decides for every lease it has taken: a
// holder's [Lease.Release] of such a lease touches nothing and returns
// ErrLeftToExpire once it was left to expire, ErrDraining otherwise. The
// hook from [Manager.ReleaseHook] (phase Release) stops the renewer and
// deletes the heartbeat last. In between, what it does with a lease still
// held is fixed by [Config].HandOff when the Manager is made, never by
// which hooks were built: with HandOff (rooms have state, and HandOff
// needs it) such a lease was not flushed and is left to expire; without,
// it is released, in one pipeline of batched compare-and-DEL calls.
//
// # Readiness
//
// [Manager.Probe] runs one read-only script: the heartbeat is this
// process's and its TTL is above TTL/3. It answers within [ProbeTimeout].
//
// # Metrics
//
// room_leases_held, room_lease_acquired_total, room_lease_renewed_total,
// room_lease_lost_total, room_lease_released_total,
// room_lease_left_to_expire_total, room_lease_renew_duration_ms,
// room_lease_check_failures_total and room_node_heartbeat_failures_total,
// registered on [Config].Registerer when set, each with the constant label
// route_prefix (the Manager's RoutePrefix).
//
// # Several managers in one process
//
// Everything a Manager names derives from its RoutePrefix: the label
// above and its hooks, "lease-handoff(room:route:)" and
// "lease-release(room:route:)". Managers with their own prefixes (and
// keys) therefore share a Registerer and a drain; a second Manager with
// the same RoutePrefix on one Registerer is refused by [New], and the
// drain refuses a hook name added twice.
//
// # Conventions
//
//   - Configuration is a [Config] whose zero fields mean the documented
//     defaults (the Default… constants); [New] refuses a bad one, naming
//     the field and the value, before anything else happens, and does no
//     I/O. [Config.Validate] is the same check, for configuration read
//     early.
//   - Work starts in [Manager.Start] and ends in [Manager.Stop] or the
//     Release hook; the renewer goroutine is the Manager's, and Stop waits
//     for it.
//   - Every blocking call takes a context first, and it bounds the wait.
//   - Errors are sentinels with the package prefix ("lease: …"), matched
//     with errors.Is and wrapped with the key they concern. How a lease
//     ended is its context's cause: one channel, [Lease.Context], for every
//     end.
//   - The drain is hooks ([Manager.HandOff], [Manager.ReleaseHook]) for
//     package drain; the Manager learns of the flip from
//     [Config].Draining.
package lease
