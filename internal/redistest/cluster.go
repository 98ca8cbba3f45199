package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots in a Redis Cluster.
const clusterSlots = 16384

// Cluster is a running 3-node Redis Cluster (three masters, no replicas)
// whose slots are split evenly across the nodes.
type Cluster struct {
	// Addrs are the nodes' host:port addresses, in slot order.
	Addrs []string
	// Servers are the nodes, in the same order as Addrs.
	Servers []*Server

	t testing.TB
}

// StartCluster starts three cluster-enabled redis-servers, assigns every slot
// with CLUSTER ADDSLOTSRANGE, joins them with CLUSTER MEET and waits until
// every node reports cluster_state:ok and knows the owner of every slot.
// The nodes are stopped at cleanup.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	for range 3 {
		s := start(t, FreePort(t), "", "",
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", // relative to the server's own --dir
			"--cluster-port", strconv.Itoa(FreePort(t)), // the default port+10000 may be taken or out of range
			"--cluster-node-timeout", "5000",
			"--cluster-announce-ip", "127.0.0.1",
		)
		c.Servers = append(c.Servers, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	per := clusterSlots / len(c.Servers)
	for i, s := range c.Servers {
		lo, hi := i*per, (i+1)*per-1
		if i == len(c.Servers)-1 {
			hi = clusterSlots - 1
		}
		c.do(ctx, s, "CLUSTER", "ADDSLOTSRANGE", lo, hi)
	}
	for _, s := range c.Servers[1:] {
		c.do(ctx, c.Servers[0], "CLUSTER", "MEET", "127.0.0.1", s.Port, busPort(t, ctx, s))
	}
	c.waitConverged(ctx)
	return c
}

// Client returns a cluster client for the nodes, closed at cleanup.
func (c *Cluster) Client() *redis.ClusterClient {
	return c.ClientWith(&redis.ClusterOptions{})
}

// ClientWith returns a cluster client built from opt with Addrs filled in,
// closed at cleanup.
func (c *Cluster) ClientWith(opt *redis.ClusterOptions) *redis.ClusterClient {
	opt.Addrs = c.Addrs
	cl := redis.NewClusterClient(opt)
	c.t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func (c *Cluster) do(ctx context.Context, s *Server, args ...any) {
	c.t.Helper()
	cl := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer cl.Close()
	if err := cl.Do(ctx, args...).Err(); err != nil {
		c.t.Fatalf("redistest: %v on %s: %v", args, s.Addr, err)
	}
}

// busPort reads the cluster bus port the server was started with.
func busPort(t testing.TB, ctx context.Context, s *Server) int {
	t.Helper()
	cl := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
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

// waitConverged polls every node until it reports cluster_state:ok and
// knows an owner for all 16384 slots. Polling is the only way to observe
// gossip converging in external processes.
func (c *Cluster) waitConverged(ctx context.Context) {
	c.t.Helper()
	var last string
	for {
		ok := true
		for _, s := range c.Servers {
			if msg := nodeConverged(ctx, s, len(c.Servers)); msg != "" {
				ok, last = false, msg
				break
			}
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("redistest: cluster did not converge: %s", last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// nodeConverged returns "" when s is ready, else what it is waiting for.
func nodeConverged(ctx context.Context, s *Server, nodes int) string {
	cl := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
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
	slots, err := cl.ClusterSlots(ctx).Result()
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
	if covered != clusterSlots || len(owners) != nodes {
		return fmt.Sprintf("%s: knows %d slots on %d nodes; want %d on %d", s.Addr, covered, len(owners), clusterSlots, nodes)
	}
	return ""
}
