package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots in a Redis Cluster.
const clusterSlots = 16384

// clusterPrimaries is how many primaries a Cluster has; its slots are
// split evenly across them.
const clusterPrimaries = 3

// DefaultNodeTimeout is a Cluster's cluster-node-timeout when its
// ClusterConfig leaves it unset: how long a node may not answer before the
// others mark it failed and, for a primary, its replica takes over.
const DefaultNodeTimeout = 5 * time.Second

// ClusterConfig describes the Cluster StartClusterWith starts.
type ClusterConfig struct {
	// Replicas is how many replicas each primary has (0: none).
	Replicas int
	// NodeTimeout is cluster-node-timeout; zero means [DefaultNodeTimeout].
	// A primary's replica is promoted about two node timeouts after the
	// primary stops answering.
	NodeTimeout time.Duration
	// Args are more redis-server arguments for every node, such as
	// "--cluster-require-full-coverage", "no".
	Args []string
	// User and Password, when set, are what every client must AUTH with,
	// as for [StartAuth]; replicas authenticate to their primary with them.
	User, Password string
}

// Cluster is a running Redis Cluster of three primaries, each with the
// replicas its ClusterConfig asked for, whose slots are split evenly across
// the primaries.
type Cluster struct {
	// Addrs are the primaries' host:port addresses as started, in slot
	// order: the seed addresses a client is configured with.
	Addrs []string
	// Servers are the primaries as started, in the same order as Addrs.
	Servers []*Server
	// Replicas are the replicas as started: Replicas[i] replicate
	// Servers[i] (until a failover changes roles).
	Replicas [][]*Server

	t   testing.TB
	cfg ClusterConfig

	mu     sync.Mutex
	paused []*Server // by FailoverPaused: not asked, as they answer nothing
}

// StartCluster starts three cluster-enabled redis-servers with no
// replicas; see StartClusterWith.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	return StartClusterWith(t, ClusterConfig{})
}

// StartClusterWith starts three cluster-enabled primaries and their
// replicas, assigns every slot with CLUSTER ADDSLOTSRANGE, joins them with
// CLUSTER MEET, attaches each replica with CLUSTER REPLICATE, and waits
// until every node reports cluster_state:ok, knows the owner of every slot
// and every replica is in sync. The nodes are stopped at cleanup.
func StartClusterWith(t testing.TB, cfg ClusterConfig) *Cluster {
	t.Helper()
	if cfg.NodeTimeout == 0 {
		cfg.NodeTimeout = DefaultNodeTimeout
	}
	c := &Cluster{t: t, cfg: cfg}
	for range clusterPrimaries {
		s := c.startNode()
		c.Servers = append(c.Servers, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}
	for range c.Servers {
		var rs []*Server
		for range cfg.Replicas {
			rs = append(rs, c.startNode())
		}
		c.Replicas = append(c.Replicas, rs)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	per := clusterSlots / len(c.Servers)
	for i, s := range c.Servers {
		lo, hi := i*per, (i+1)*per-1
		if i == len(c.Servers)-1 {
			hi = clusterSlots - 1
		}
		c.do(ctx, s, "CLUSTER", "ADDSLOTSRANGE", lo, hi)
	}
	for _, s := range c.all()[1:] {
		c.do(ctx, c.Servers[0], "CLUSTER", "MEET", "127.0.0.1", s.Port, busPort(t, ctx, s))
	}
	c.waitConverged(ctx, nil)
	for i, rs := range c.Replicas {
		id := c.NodeID(c.Servers[i])
		for _, r := range rs {
			c.do(ctx, r, "CLUSTER", "REPLICATE", id)
		}
	}
	c.waitConverged(ctx, nil)
	return c
}

// StartClusterNode starts one cluster-enabled redis-server, with args
// added, that knows no other node and serves no slot: for a test that
// forms a cluster step by step (CLUSTER ADDSLOTSRANGE, then [Meet]). It
// is stopped at cleanup.
func StartClusterNode(t testing.TB, args ...string) *Server {
	t.Helper()
	c := &Cluster{t: t, cfg: ClusterConfig{NodeTimeout: DefaultNodeTimeout, Args: args}}
	return c.startNode()
}

// Meet has s meet other (CLUSTER MEET): gossip then joins their clusters.
func Meet(t testing.TB, ctx context.Context, s, other *Server) {
	t.Helper()
	c := &Cluster{t: t}
	c.do(ctx, s, "CLUSTER", "MEET", "127.0.0.1", other.Port, busPort(t, ctx, other))
}

// startNode starts one cluster-enabled redis-server.
func (c *Cluster) startNode() *Server {
	return startFree(c.t, c.cfg.User, c.cfg.Password, func() []string {
		args := []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", // relative to the server's own --dir
			"--cluster-port", strconv.Itoa(FreePort(c.t)), // the default port+10000 may be taken or out of range
			"--cluster-node-timeout", strconv.FormatInt(c.cfg.NodeTimeout.Milliseconds(), 10),
			"--cluster-announce-ip", "127.0.0.1",
		}
		if c.cfg.Password != "" {
			args = append(args, "--masterauth", c.cfg.Password)
			if c.cfg.User != "default" {
				args = append(args, "--masteruser", c.cfg.User)
			}
		}
		return append(args, c.cfg.Args...)
	})
}

// all is every node as started, primaries first.
func (c *Cluster) all() []*Server {
	return append(slices.Clone(c.Servers), slices.Concat(c.Replicas...)...)
}

// down reports whether s answers nothing: killed, or paused by FailoverPaused.
func (c *Cluster) down(s *Server) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.Exited() || slices.Contains(c.paused, s)
}

// Client returns a cluster client for the nodes, closed at cleanup.
func (c *Cluster) Client() *redis.ClusterClient {
	return c.ClientWith(&redis.ClusterOptions{})
}

// ClientWith returns a cluster client built from opt with Addrs (and the
// credentials, if any) filled in, closed at cleanup.
func (c *Cluster) ClientWith(opt *redis.ClusterOptions) *redis.ClusterClient {
	opt.Addrs = slices.Clone(c.Addrs) // go-redis appends to it: clients must not share it
	opt.Username, opt.Password = c.cfg.User, c.cfg.Password
	cl := redis.NewClusterClient(opt)
	c.t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// URL is the cluster's redis:// URL as go-redis's ParseClusterURL reads
// it: the first primary, the others as addr parameters, credentials
// included.
func (c *Cluster) URL() string {
	u := c.Servers[0].URL()
	for _, a := range c.Addrs[1:] {
		sep := "&"
		if !strings.Contains(u, "?") {
			sep = "?"
		}
		u += sep + "addr=" + a
	}
	return u
}

// NodeID is s's cluster node id.
func (c *Cluster) NodeID(s *Server) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl := nodeClient(s)
	defer cl.Close()
	id, err := cl.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		c.t.Fatalf("redistest: CLUSTER MYID on %s: %v", s.Addr, err)
	}
	return id
}

// PrimaryOf is the server that serves key's slot now, as the first live
// node asked says.
func (c *Cluster) PrimaryOf(ctx context.Context, key string) *Server {
	c.t.Helper()
	for _, s := range c.all() {
		if c.down(s) {
			continue
		}
		cl := nodeClient(s)
		slot, err := cl.ClusterKeySlot(ctx, key).Result()
		var slots []redis.ClusterSlot
		if err == nil {
			slots, err = clusterSlotsOf(ctx, cl)
		}
		cl.Close()
		if err != nil {
			continue
		}
		for _, r := range slots {
			if int64(r.Start) <= slot && slot <= int64(r.End) && len(r.Nodes) > 0 {
				return c.server(r.Nodes[0].Addr)
			}
		}
	}
	c.t.Fatalf("redistest: no live node knows the primary of %q", key)
	return nil
}

// server is the node listening on addr.
func (c *Cluster) server(addr string) *Server {
	for _, s := range c.all() {
		if s.Addr == addr {
			return s
		}
	}
	c.t.Fatalf("redistest: %s is not a node of the cluster", addr)
	return nil
}

// Failover SIGKILLs primary and waits until the cluster itself has
// promoted one of its replicas and every live node reports cluster_state:ok
// with every slot served by a live primary. It returns the promoted
// replica and when it was first seen answering ROLE as a primary.
func (c *Cluster) Failover(ctx context.Context, primary *Server) (*Server, time.Time) {
	c.t.Helper()
	return c.failover(ctx, primary, func(*Server) { primary.Kill() })
}

// FailoverPlanned is [Cluster.Failover] as an operator does it before
// maintenance: CLUSTER FAILOVER on a replica of primary, which takes over
// once it has every write, and primary stays up as its replica, answering
// MOVED for the slots it served. It returns once primary replicates from
// the promoted node with its link up.
func (c *Cluster) FailoverPlanned(ctx context.Context, primary *Server) (*Server, time.Time) {
	c.t.Helper()
	promoted, at := c.failover(ctx, primary, func(replica *Server) { c.do(ctx, replica, "CLUSTER", "FAILOVER") })
	waitReplicating(ctx, c.t, primary, promoted)
	return promoted, at
}

// FailoverPaused is [Cluster.Failover] with primary paused (SIGSTOP)
// instead of killed, as a host that vanished or a partition leaves it: its
// port still takes connections and answers nothing, so clients see
// timeouts rather than refused connections. It stays paused; cleanup
// kills it.
func (c *Cluster) FailoverPaused(ctx context.Context, primary *Server) (*Server, time.Time) {
	c.t.Helper()
	return c.failover(ctx, primary, func(*Server) {
		primary.Pause()
		c.mu.Lock()
		c.paused = append(c.paused, primary)
		c.mu.Unlock()
	})
}

// Resume continues a node [Cluster.FailoverPaused] left paused, as a
// partition heals, and waits until the cluster has converged with it back:
// a former primary returns as a replica of the one promoted in its place.
func (c *Cluster) Resume(ctx context.Context, s *Server) {
	c.t.Helper()
	c.mu.Lock()
	i := slices.Index(c.paused, s)
	if i >= 0 {
		c.paused = slices.Delete(c.paused, i, i+1)
	}
	c.mu.Unlock()
	if i < 0 {
		c.t.Fatalf("redistest: %s was not paused by FailoverPaused", s.Addr)
	}
	s.Resume()
	c.waitConverged(ctx, nil)
}

// failover stops primary (given its first replica) and waits for a replica's promotion.
func (c *Cluster) failover(ctx context.Context, primary *Server, stop func(replica *Server)) (*Server, time.Time) {
	c.t.Helper()
	replicas := c.replicasOf(ctx, primary)
	if len(replicas) == 0 {
		c.t.Fatalf("redistest: %s has no replica to fail over to", primary.Addr)
	}
	stop(replicas[0])
	var promoted *Server
	var at time.Time
	for promoted == nil {
		for _, r := range replicas {
			if role(ctx, r) == "master" {
				promoted, at = r, time.Now()
				break
			}
		}
		if promoted == nil && !pause(ctx, 20*time.Millisecond) {
			c.t.Fatalf("redistest: no replica of %s was promoted: %v", primary.Addr, ctx.Err())
		}
	}
	c.waitConverged(ctx, primary)
	return promoted, at
}

// replicasOf are the live nodes that replicate primary now.
func (c *Cluster) replicasOf(ctx context.Context, primary *Server) []*Server {
	c.t.Helper()
	id := c.NodeID(primary)
	cl := nodeClient(primary)
	defer cl.Close()
	ids, err := cl.Do(ctx, "CLUSTER", "REPLICAS", id).StringSlice()
	if err != nil {
		c.t.Fatalf("redistest: CLUSTER REPLICAS on %s: %v", primary.Addr, err)
	}
	var out []*Server
	for _, line := range ids {
		// <id> <ip:port@cport[,hostname]> <flags> …
		f := strings.Fields(line)
		if len(f) < 3 || strings.Contains(f[2], "fail") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		out = append(out, c.server(addr))
	}
	return out
}

// role is what ROLE answers first on s ("master", "slave"), or "" when
// it does not answer.
func role(ctx context.Context, s *Server) string {
	cl := nodeClient(s)
	defer cl.Close()
	v, err := cl.Do(ctx, "ROLE").Slice()
	if err != nil || len(v) == 0 {
		return ""
	}
	r, _ := v[0].(string)
	return r
}

// MigrateSlots moves every slot from serves to to, keys included, with
// redis-cli --cluster reshard as an operator would, and waits until every
// node agrees.
func (c *Cluster) MigrateSlots(ctx context.Context, from, to *Server) {
	c.t.Helper()
	n := 0
	cl := nodeClient(from)
	slots, err := clusterSlotsOf(ctx, cl)
	cl.Close()
	if err != nil {
		c.t.Fatalf("redistest: CLUSTER SLOTS on %s: %v", from.Addr, err)
	}
	for _, r := range slots {
		if len(r.Nodes) > 0 && r.Nodes[0].Addr == from.Addr {
			n += int(r.End-r.Start) + 1
		}
	}
	if n == 0 {
		c.t.Fatalf("redistest: %s serves no slot to migrate", from.Addr)
	}
	args := []string{"--cluster", "reshard", to.Addr,
		"--cluster-from", c.NodeID(from), "--cluster-to", c.NodeID(to),
		"--cluster-slots", strconv.Itoa(n), "--cluster-yes"}
	if c.cfg.Password != "" {
		args = append(args, "--user", c.cfg.User, "--pass", c.cfg.Password, "--no-auth-warning")
	}
	out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput()
	if err != nil {
		c.t.Fatalf("redistest: redis-cli --cluster reshard %d slots from %s to %s: %v\n%s", n, from.Addr, to.Addr, err, lastLine(string(out)))
	}
	c.waitConverged(ctx, nil)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func (c *Cluster) do(ctx context.Context, s *Server, args ...any) {
	c.t.Helper()
	cl := nodeClient(s)
	defer cl.Close()
	if err := cl.Do(ctx, args...).Err(); err != nil {
		c.t.Fatalf("redistest: %v on %s: %v", args, s.Addr, err)
	}
}

// nodeClient is a client of the one node s, which neither retries nor
// follows redirects.
func nodeClient(s *Server) *redis.Client {
	o := s.options()
	o.MaxRetries = -1
	return redis.NewClient(o)
}

// clusterSlotsOf is CLUSTER SLOTS on cl's node.
func clusterSlotsOf(ctx context.Context, cl *redis.Client) ([]redis.ClusterSlot, error) {
	//lint:ignore SA1019 CLUSTER SHARDS needs Redis 7; the suite runs whatever redis-server is installed
	return cl.ClusterSlots(ctx).Result()
}

// busPort reads the cluster bus port the server was started with.
func busPort(t testing.TB, ctx context.Context, s *Server) int {
	t.Helper()
	cl := nodeClient(s)
	defer cl.Close()
	kv, err := cl.ConfigGet(ctx, "cluster-port").Result()
	if err != nil {
		t.Fatalf("redistest: CONFIG GET cluster-port on %s: %v", s.Addr, err)
	}
	p, err := strconv.Atoi(kv["cluster-port"])
	if err != nil {
		t.Fatalf("redistest: cluster-port %q on %s: %v", kv["cluster-port"], s.Addr, err)
	}
	return p
}

// waitConverged polls every node but gone until it reports
// cluster_state:ok, knows every node, sees all 16384 slots served by
// three primaries other than gone, and, for a replica, is in sync with
// its primary. Polling is the only way to observe gossip converging in
// external processes.
func (c *Cluster) waitConverged(ctx context.Context, gone *Server) {
	c.t.Helper()
	var last string
	for {
		last = ""
		for _, s := range c.all() {
			if s == gone || c.down(s) {
				continue
			}
			if last = nodeConverged(ctx, s, len(c.all()), gone); last != "" {
				break
			}
		}
		if last == "" {
			return
		}
		if !pause(ctx, 20*time.Millisecond) {
			c.t.Fatalf("redistest: cluster did not converge: %s", last)
		}
	}
}

// pause waits d, or reports false once ctx ends.
func pause(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// nodeConverged returns "" when s is ready, else what it is waiting for.
func nodeConverged(ctx context.Context, s *Server, nodes int, gone *Server) string {
	cl := nodeClient(s)
	defer cl.Close()
	info, err := cl.ClusterInfo(ctx).Result()
	if err != nil {
		return fmt.Sprintf("%s: CLUSTER INFO: %v", s.Addr, err)
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return fmt.Sprintf("%s: cluster_state not ok", s.Addr)
	}
	if !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(nodes)) {
		return fmt.Sprintf("%s: does not know all %d nodes yet", s.Addr, nodes)
	}
	slots, err := clusterSlotsOf(ctx, cl)
	if err != nil {
		return fmt.Sprintf("%s: CLUSTER SLOTS: %v", s.Addr, err)
	}
	covered, owners := 0, map[string]bool{}
	for _, r := range slots {
		covered += int(r.End-r.Start) + 1
		if len(r.Nodes) > 0 {
			owners[r.Nodes[0].Addr] = true
		}
	}
	if gone != nil && owners[gone.Addr] {
		return fmt.Sprintf("%s: still has %s serving slots", s.Addr, gone.Addr)
	}
	if covered != clusterSlots || len(owners) > clusterPrimaries {
		return fmt.Sprintf("%s: knows %d slots on %d nodes; want %d on at most %d", s.Addr, covered, len(owners), clusterSlots, clusterPrimaries)
	}
	repl := cl.InfoMap(ctx, "replication")
	if err := repl.Err(); err != nil {
		return fmt.Sprintf("%s: INFO replication: %v", s.Addr, err)
	}
	if repl.Item("Replication", "role") == "slave" && repl.Item("Replication", "master_link_status") != "up" {
		return fmt.Sprintf("%s: replica not in sync with its primary yet", s.Addr)
	}
	return ""
}
