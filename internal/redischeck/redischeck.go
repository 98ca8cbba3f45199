// Package redischeck refuses a go-redis client or server that cannot keep
// leases: a Ring, options under which a call can outlive its budget, be
// sent more than twice or read from a replica, a server too old for the lease scripts, and a
// maxmemory-policy that may evict lease keys. Its importers are lease,
// whose algorithm reads better without these checks beside it, and the
// readiness check of package readiness/redischeck, which shares
// [FollowFailover] with it.
package redischeck

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
)

// FollowFailover asks a Cluster client to reload its slot map; other
// clients need nothing. Call it after a call failed in a way a failover
// explains. go-redis reloads the map by itself only on MOVED or ASK, or once
// ClusterStateReloadInterval (a minute by default) has passed, and a dead
// primary answers neither: its slots stay mapped to it long after its
// replica took over. The reload is go-redis's own, in the background and
// coalesced (one at a time, at most one every 200 ms), so it costs the
// caller no round trip.
func FollowFailover(c redis.UniversalClient) {
	if cl, ok := c.(*redis.ClusterClient); ok {
		cl.ReloadState(context.Background()) // it ignores the context: the reload is not the caller's
	}
}

// IsNil reports whether c is nil, or a nil *redis.Client, *redis.ClusterClient
// or *redis.Ring in the interface.
func IsNil(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case nil:
		return true
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}

// Client refuses, in one error, a client under which a call could outlive
// its context's deadline (at most callTimeout) or be sent more than twice,
// or a read reach a replica. It checks the options rather than
// building a client from them: a second pool would lose the team's hooks.
// Client types other than *redis.Client and *redis.ClusterClient pass.
func Client(c redis.UniversalClient, callTimeout time.Duration) error {
	var (
		options    string // the options type, for the advice
		retries    int
		noRetries  string // what go-redis reads as no retries, for the advice
		honoursCtx bool
		readOnly   bool // reads may go to replicas
	)
	if IsNil(c) {
		return fmt.Errorf("client is nil")
	}
	switch cl := c.(type) {
	case *redis.Ring: // it moves an unreachable shard's keys: a room would get two owners
		return fmt.Errorf("*redis.Ring cannot keep leases: while a shard is unreachable it sends the shard's keys to another shard, " +
			"so a room can have two owners; use a *redis.Client (standalone or Sentinel) or a *redis.ClusterClient")
	case *redis.Client:
		o := cl.Options()
		options, retries, honoursCtx = optionsType(c), o.MaxRetries, o.ContextTimeoutEnabled
		noRetries = "go-redis reads 0 as 3, -1 as none"
	case *redis.ClusterClient:
		o := cl.Options() // as go-redis resolved them: RouteByLatency, RouteRandomly and FailoverOptions.ReplicaOnly set ReadOnly
		// Without seeds go-redis answers "cluster has no nodes" forever,
		// which lease waits out as a cluster still being created.
		if len(o.Addrs) == 0 && o.ClusterSlots == nil {
			return fmt.Errorf("*redis.ClusterClient has no seed nodes: set redis.ClusterOptions.Addrs")
		}
		options, retries, honoursCtx = optionsType(c), o.MaxRetries, o.ContextTimeoutEnabled
		noRetries, readOnly = "0 or -1 is none", o.ReadOnly
	default:
		return nil
	}
	var bad []string
	if retries > 1 {
		bad = append(bad, fmt.Sprintf("MaxRetries %d: want at most 1, or a retried renewal can land after the lease expired (%s)", retries, noRetries))
	}
	if readOnly {
		bad = append(bad, "ReadOnly true (RouteByLatency, RouteRandomly and a failover client's ReplicaOnly set it): want false, or a node's session is read "+
			"from a replica that may lag, and a live node's room taken; give leases a client of their own")
	}
	if !honoursCtx {
		// Socket timeouts alone would do for one call, but the renewer could
		// not lose the session at its deadline while a renewal hangs.
		bad = append(bad, fmt.Sprintf("ContextTimeoutEnabled false: want true, or go-redis ignores each call's deadline "+
			"(CallTimeout %s, less near the session's deadline) and a renewal that hangs tells the holders late",
			callTimeout.Truncate(time.Millisecond)))
	}
	if len(bad) == 0 {
		return nil
	}
	advice := ""
	if _, ok := c.(*redis.ClusterClient); ok {
		advice = ", with ReadTimeout and DialTimeout as docs/leases.md gives"
	}
	return fmt.Errorf("%T options cannot keep leases: %s; e.g. MaxRetries: 1, ContextTimeoutEnabled: true, DialerRetries: 1 in %s%s",
		c, strings.Join(bad, "; "), options, advice)
}

// DialWarning says, or returns "", when go-redis retries a refused dial
// for callTimeout or longer (DialerRetries 5, 100 ms apart, by default).
// Nothing unsafe follows, so it is no refusal; but a call to a server that
// is down then ends as a timeout that names no refusal, and a Cluster
// client's slot map reload, which dials every node it tries, waits for a
// dead primary too: a call after a failover takes about a second instead
// of one call's time.
func DialWarning(c redis.UniversalClient, callTimeout time.Duration) string {
	var retries int
	var wait time.Duration
	var ownBackoff bool // a backoff of the caller's own: nothing to judge it by
	switch cl := c.(type) {
	case *redis.Client:
		o := cl.Options()
		retries, wait, ownBackoff = o.DialerRetries, o.DialerRetryTimeout, o.DialerRetryBackoff != nil
	case *redis.ClusterClient:
		o := cl.Options()
		retries, wait, ownBackoff = o.DialerRetries, o.DialerRetryTimeout, o.DialerRetryBackoff != nil
	default:
		return ""
	}
	if ownBackoff {
		return ""
	}
	retries, wait = dials(retries, wait)
	retried := time.Duration(retries-1) * wait
	if retried < callTimeout {
		return ""
	}
	failover := ""
	if _, ok := c.(*redis.ClusterClient); ok {
		failover = ", and a failover is followed later"
	}
	return fmt.Sprintf("go-redis retries a refused dial for %s (DialerRetries %d, %s apart), at least CallTimeout %s: "+
		"while Redis is down, lease calls fail as timeouts instead of \"connection refused\"%s; "+
		"set DialerRetries: 1 in %s (docs/leases.md, \"The client you give it\")",
		retried, retries, wait, callTimeout.Truncate(time.Millisecond), failover, optionsType(c))
}

// dials is how many times a pool dials and how long it waits between
// dials, from what its options leave (a Cluster client's keep -1, which
// each node's pool reads as the default: 5, 100 ms apart).
func dials(retries int, wait time.Duration) (int, time.Duration) {
	if retries <= 0 {
		retries = 5
	}
	if wait <= 0 {
		wait = 100 * time.Millisecond
	}
	return retries, wait
}

// ReloadWarning says, or returns "", when a Cluster client could wait
// longer than bound for one node while reloading its slot map: go-redis
// does it without a context, waiting for each node that does not answer
// ReadTimeout on every try of the read (MaxRetries sends it again) or
// DialTimeout on every dial. After the failover of a primary that hangs
// rather than dies, the promoted replica is reached that much later. A
// client with ClusterSlots of its own does not ask the nodes.
func ReloadWarning(c redis.UniversalClient, bound time.Duration) string {
	cl, ok := c.(*redis.ClusterClient)
	if !ok {
		return ""
	}
	o := cl.Options() // as go-redis resolved them: a ReadTimeout of 0 is none, a MaxRetries of -1 none
	if o.ClusterSlots != nil {
		return ""
	}
	tries := max(o.MaxRetries, 0) + 1
	n, wait := dials(o.DialerRetries, o.DialerRetryTimeout)
	if o.DialerRetryBackoff != nil {
		wait = 0 // the caller's own: counted as none
	}
	read, dial := time.Duration(tries)*o.ReadTimeout, time.Duration(n)*o.DialTimeout+time.Duration(n-1)*wait
	var over []string
	switch {
	case o.ReadTimeout <= 0:
		over = append(over, "without end to read (ReadTimeout -1, none)")
	case read > bound:
		over = append(over, fmt.Sprintf("%s to read (ReadTimeout %s × %d tries, MaxRetries %d)", read, o.ReadTimeout, tries, o.MaxRetries))
	}
	if dial > bound {
		over = append(over, fmt.Sprintf("%s to connect (DialTimeout %s × %d dials)", dial, o.DialTimeout, n))
	}
	if len(over) == 0 {
		return ""
	}
	return fmt.Sprintf("go-redis reloads the slot map without a context, waiting for each node that does not answer up to %s: "+
		"a failover of a primary that hangs instead of dying is followed that much later; keep each within %s, "+
		"e.g. ReadTimeout 250ms with MaxRetries 1 and DialTimeout 500ms with DialerRetries 1 at the default TTL, in %s "+
		"(docs/leases.md, \"The client you give it\")",
		strings.Join(over, " and "), bound.Truncate(time.Millisecond), optionsType(c))
}

// Sentinel reports whether c follows a Sentinel's announcements:
// redis.NewFailoverClient's client, or a Cluster client whose slot map
// comes from a function and not from seeds (NewFailoverClusterClient's,
// most likely; a ClusterSlots of the caller's own reads the same). go-redis
// has no accessor for either: the first carries a placeholder address,
// which this reads. An upgrade that changes it makes this false, losing
// only advice and a warning.
func Sentinel(c redis.UniversalClient) bool {
	switch cl := c.(type) {
	case *redis.Client:
		return cl.Options().Addr == "FailoverClient"
	case *redis.ClusterClient:
		return len(cl.Options().Addrs) == 0 && cl.Options().ClusterSlots != nil
	}
	return false
}

// NoMaster reports whether err is a Sentinel client's failure to learn its
// master from sentinels that answered but named none for its
// FailoverOptions.MasterName: misspelled, or not monitored yet. go-redis
// calls them all unreachable and joins their empty answers (redis.Nil)
// into its error: both are read, so that a key's absence (redis.Nil,
// however wrapped) never matches. An upgrade that rewords it makes this
// false, losing only an explanation.
func NoMaster(err error) bool {
	return errors.Is(err, redis.Nil) && strings.Contains(err.Error(), "all sentinels specified in configuration are unreachable")
}

// NoMasterCause says, in a log line or an error, what [NoMaster]'s error means.
const NoMasterCause = "the sentinels that answered name no master of FailoverOptions.MasterName (misspelled, or not monitored yet)"

// Addr names the server c talks to, for logs and errors: its address, or
// for a Sentinel client, which keeps the master's to itself, what it is.
func Addr(c *redis.Client) string {
	if Sentinel(c) {
		return "the Sentinel master of a redis.FailoverOptions client"
	}
	return c.Options().Addr
}

// optionsType names the options c was built from, for advice.
func optionsType(c redis.UniversalClient) string {
	switch cl := c.(type) {
	case *redis.Client:
		if Sentinel(cl) {
			return "redis.FailoverOptions"
		}
		return "redis.Options"
	case *redis.ClusterClient:
		if len(cl.Options().Addrs) == 0 { // a slot map of its own: NewFailoverClusterClient's, most likely
			return "redis.FailoverOptions (or redis.ClusterOptions, with a ClusterSlots of your own)"
		}
		return "redis.ClusterOptions"
	}
	return fmt.Sprintf("%T", c)
}

// Servers checks every server a client writes leases to.
type Servers struct {
	AcceptEviction bool                                                              // warn of an evicting policy instead of refusing it
	Unsafe         error                                                             // wrapped by every refusal
	Logger         *slog.Logger                                                      // receives the warnings
	Retry          func(ctx context.Context, call func(context.Context) error) error // the caller's retry
	Retryable      func(error) bool                                                  // whether an error says "not reached" rather than "refused"
}

// minVersion is the oldest server the scripts run on: acquire.lua reads
// TIME and then writes, which servers before 5.0 refuse.
var minVersion = [3]int{5, 0, 0}

// Check refuses, on every server c writes to, one the lease scripts cannot
// run on or whose maxmemory-policy may evict lease keys (unless
// AcceptEviction), and warns of what it cannot read: a managed Redis may
// refuse INFO or CONFIG.
func (s Servers) Check(ctx context.Context, c redis.UniversalClient) error {
	return EachServer(ctx, c, s.Retry, s.check)
}

// ErrSlotsUncovered is the error of EachServer's slot-map load while the
// Cluster does not serve every slot: a caller's retry should treat it as
// it treats a server not reached yet.
var ErrSlotsUncovered = errors.New("the cluster does not serve every slot yet")

// EachServer calls fn for every server c writes to, with its address: the
// primaries of a Cluster, or c itself. A Cluster's slot map is loaded
// first through retry, until it covers every slot ([ErrSlotsUncovered]
// before): a cluster still forming lists only some primaries, and a
// primary missed here would never be checked, nor get the scripts.
func EachServer(ctx context.Context, c redis.UniversalClient, retry func(context.Context, func(context.Context) error) error,
	fn func(ctx context.Context, c redis.UniversalClient, addr string) error) error {
	each := func(ctx context.Context, n *redis.Client) error { return fn(ctx, n, Addr(n)) }
	switch c := c.(type) {
	case *redis.ClusterClient:
		var primaries []*redis.Client
		err := retry(ctx, func(ctx context.Context) (err error) {
			primaries, err = clusterPrimaries(ctx, c)
			return err
		})
		if err != nil {
			return fmt.Errorf("load the slot map from %s: %w", strings.Join(c.Options().Addrs, ","), err)
		}
		var g errgroup.Group
		for _, n := range primaries {
			g.Go(func() error { return each(ctx, n) })
		}
		return g.Wait()
	case *redis.Client:
		return each(ctx, c)
	}
	return fn(ctx, c, "the server")
}

// clusterPrimaries reloads c's slot map (ForEachMaster does) and returns
// the primaries that serve slots, or ErrSlotsUncovered unless CLUSTER
// SLOTS shows every slot served, each range by a primary of the map. The
// map may list primaries that serve nothing: from v9.24, go-redis lists a
// failed primary whose replica took over, which answers nothing until it
// returns. They are matched by address; where go-redis rewrote every
// address (a loopback one announced behind another host), a map that lists
// as many primaries as serve slots is taken as it is; otherwise (more
// listed, or a map older than the failover, listing the dead primary at
// its address) they are matched by node id (CLUSTER MYID). A map from ClusterOptions.ClusterSlots
// is the caller's own and taken as it is.
func clusterPrimaries(ctx context.Context, c *redis.ClusterClient) ([]*redis.Client, error) {
	var mu sync.Mutex
	var listed []*redis.Client
	err := c.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		listed = append(listed, n)
		return nil
	})
	if err != nil || c.Options().ClusterSlots != nil {
		return listed, err
	}
	if len(listed) == 0 { // no slot assigned yet: CLUSTER SLOTS would fail as "cluster has no nodes"
		return nil, fmt.Errorf("%w: no slot is served yet", ErrSlotsUncovered)
	}
	//lint:ignore SA1019 CLUSTER SHARDS needs Redis 7; leases run on 5.0 and later
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	served, serving := 0, map[string]string{} // the serving primaries' node ids and addresses
	for _, r := range slots {
		if len(r.Nodes) > 0 {
			served += r.End - r.Start + 1
			serving[r.Nodes[0].ID] = r.Nodes[0].Addr
		}
	}
	if served < clusterSlots {
		return nil, fmt.Errorf("%w: CLUSTER SLOTS shows %d of %d slots served", ErrSlotsUncovered, served, clusterSlots)
	}
	var byAddr []*redis.Client
	for _, n := range listed {
		for _, addr := range serving {
			if n.Options().Addr == addr {
				byAddr = append(byAddr, n)
				break
			}
		}
	}
	switch {
	case len(byAddr) == len(serving):
		return byAddr, nil
	case len(byAddr) == 0 && len(listed) == len(serving): // every address rewritten
		return listed, nil
	}
	byID, err := servingOf(ctx, listed, serving)
	if len(byID) < len(serving) {
		why := ""
		if err != nil {
			why = " (" + err.Error() + ")"
		}
		return nil, fmt.Errorf("%w: CLUSTER SLOTS shows every slot served, by %d primaries; the client's slot map lists %d, "+
			"and %d of them answer CLUSTER MYID with a serving one's id%s", ErrSlotsUncovered, len(serving), len(listed), len(byID), why)
	}
	return byID, nil
}

// servingOf asks each of listed for its node id (CLUSTER MYID) and returns
// those whose id is in serving, and the first error of those that did not
// answer. It stops asking once every id in serving has answered, but a
// call blocked on a node that answers nothing ends at ctx's deadline
// (go-redis does not end a read on a cancel).
func servingOf(ctx context.Context, listed []*redis.Client, serving map[string]string) ([]*redis.Client, error) {
	var wg sync.WaitGroup
	defer wg.Wait() // after the cancel below
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		n   *redis.Client
		id  string
		err error
	}
	answers := make(chan answer, len(listed))
	for _, n := range listed {
		wg.Go(func() {
			id, err := n.ClusterMyID(ctx).Result()
			answers <- answer{n, id, err}
		})
	}
	var primaries []*redis.Client
	var first error
	found := map[string]bool{}
	for range listed {
		a := <-answers
		if a.err != nil && first == nil {
			first = fmt.Errorf("%s: %w", Addr(a.n), a.err)
		}
		if _, ok := serving[a.id]; ok && !found[a.id] {
			found[a.id] = true
			primaries = append(primaries, a.n)
			if len(found) == len(serving) {
				break
			}
		}
	}
	return primaries, first
}

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

func (s Servers) check(ctx context.Context, c redis.UniversalClient, addr string) error {
	var info, cfg map[string]string
	infoErr := s.Retry(ctx, func(ctx context.Context) error {
		text, err := c.Info(ctx).Result() // the default sections hold server and memory
		info = parseInfo(text)
		return err
	})
	if NoMaster(infoErr) {
		return fmt.Errorf("check %s: %s: %w", addr, NoMasterCause, infoErr)
	}
	err := infoErr
	policy := info["maxmemory_policy"]
	if policy == "" && (err == nil || !s.Retryable(err)) {
		err = s.Retry(ctx, func(ctx context.Context) (err error) {
			cfg, err = c.ConfigGet(ctx, "maxmemory-policy").Result()
			return err
		})
		policy = cfg["maxmemory-policy"]
	}
	if err != nil && (s.Retryable(err) || ctx.Err() != nil) {
		// The server was not reached: nothing below could be read, and a
		// warning built on that would point away from the cause.
		return fmt.Errorf("check %s: %w", addr, err)
	}
	switch version := info["redis_version"]; {
	case version == "":
		why := "INFO has no redis_version"
		if infoErr != nil {
			why = infoErr.Error()
		}
		s.Logger.Warn("cannot read the Redis version (INFO); the lease scripts need Redis 5.0.0 or later",
			"redis_addr", addr, "error", why)
	case !atLeast(version, minVersion):
		return fmt.Errorf("%w: %s runs Redis %s; the lease scripts need 5.0.0 or later (acquire.lua reads TIME before writing)",
			s.Unsafe, addr, version)
	}
	switch {
	case policy == "":
		s.Logger.Warn("cannot read maxmemory-policy (INFO and CONFIG GET refused); unless it is noeviction, Redis may evict a lease key and give its room two owners",
			"redis_addr", addr, "error", fmt.Sprint(err))
	case policy == "noeviction":
	case s.AcceptEviction:
		s.Logger.Warn("maxmemory-policy may evict lease keys and give a room two owners; accepted by Config.AcceptEviction",
			"redis_addr", addr, "maxmemory_policy", policy)
	default:
		return fmt.Errorf("%w: %s has maxmemory-policy %s, which may evict lease keys (they have a TTL) and give a room two owners; "+
			"set maxmemory-policy noeviction, or Config.AcceptEviction to accept the risk", s.Unsafe, addr, policy)
	}
	return nil
}

// parseInfo reads the key:value lines of an INFO reply.
func parseInfo(text string) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(text) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			out[k] = v
		}
	}
	return out
}

// atLeast reports whether version (major.minor.patch) is at least min. An
// unparseable version passes: the scripts themselves fail loudly.
func atLeast(version string, min [3]int) bool {
	for i, p := range strings.SplitN(version, ".", 3) {
		n, err := strconv.Atoi(strings.TrimFunc(p, func(r rune) bool { return r < '0' || r > '9' }))
		if err != nil {
			return true
		}
		if n != min[i] {
			return n > min[i]
		}
	}
	return true
}
