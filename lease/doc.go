// Package lease gives a node exclusive ownership of rooms through Redis
// routes (room:route:{ID}) with fencing tokens, hung off one session per
// node (room:node:{NODE}) as etcd hangs keys off a lease: one call per
// tick renews every room held, one call at drain frees them all, and a
// crashed node's rooms are free within a TTL (1 s by default). Beside it:
// lost-session signals before expiry, a drain gate and the drain's
// per-room hand-off, over a standalone, Sentinel (with a TTL of 3 s: a
// Sentinel failover takes about a second to announce) or Cluster client.
// docs/leases.md holds the algorithm, the budgets and the safety argument.
//
// A lease call must end within CallTimeout (TTL/6) and be sent at most
// twice (a Cluster client's redirects aside), and reads must not reach a
// replica: [New] refuses a client that could do otherwise, naming each
// option, and [Manager.Start] warns of dial retries that outlast a call,
// and of a Cluster client whose timeouts let a slot map reload wait more
// than TTL/2 for a hung node (docs/leases.md lists them). For example:
//
//	redis.NewClient(&redis.Options{Addr: addr, MaxRetries: 1, ContextTimeoutEnabled: true, DialerRetries: 1})
//	redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds, MaxRetries: 1, ContextTimeoutEnabled: true, DialerRetries: 1,
//		ReadTimeout: 250 * time.Millisecond, DialTimeout: 500 * time.Millisecond}) // at the default TTL
//
// On a Cluster, go-redis does not follow a failover by itself for up to a
// minute: the Manager asks after its own failed calls, and your calls on
// the same client need a hook that asks after theirs (docs/leases.md, "On
// a Redis Cluster", has it).
//
// Make a Manager with [New], [Manager.Start] it, [Manager.Acquire] a room,
// pass [Lease.Token] with every write and work under [Lease.Context], which
// ends with the lease. A room this node cannot take goes where
// [Manager.Place] says: its holder, or the active node that takes it. For the drain, call [Manager.BeginDrain] at the flip and
// add [Manager.HandOff] and [Manager.ReleaseHook] to the drain's hooks;
// fxlease does all of it but the hand-off, whose fn is the service's. The
// metrics, listed in docs/reference.md, go on [Config].Registerer labelled
// route_prefix, so managers with their own RoutePrefix (and their own
// NodePrefix or Node: one session per node id) can share it.
package lease
