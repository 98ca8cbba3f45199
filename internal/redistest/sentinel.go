package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel is a primary and its replica watched by one redis-sentinel
// under the master name [SentinelMaster], as a team runs Redis with
// Sentinel (one sentinel decides alone: quorum 1).
type Sentinel struct {
	Sentinel *Server
	servers  [2]*Server // the primary and the replica at the start
	t        testing.TB
}

// SentinelMaster is the master name the sentinel watches.
const SentinelMaster = "mymaster"

// StartSentinel starts a primary, a replica of it and a sentinel watching
// them, and waits until the sentinel knows the replica: a failover needs one.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	primary, replica := StartReplicated(t)
	s := &Sentinel{servers: [2]*Server{primary, replica}, t: t}
	for try := 1; ; try++ {
		// The sentinel rewrites its config file: a fresh one per try.
		conf := filepath.Join(t.TempDir(), "sentinel.conf")
		text := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 1\nsentinel down-after-milliseconds %[1]s 1000\nsentinel failover-timeout %[1]s 10000\n",
			SentinelMaster, primary.Port)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatalf("redistest: %v", err)
		}
		sen, err := launch(t, conf, FreePort(t), "", "")
		if err == nil {
			s.Sentinel = sen
			break
		}
		if !errors.Is(err, errPortTaken) || try == 5 {
			t.Fatalf("redistest: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sc := s.sentinelClient()
	defer sc.Close()
	for {
		// The sentinel's view of the replica comes from its last INFO of it,
		// which can say "ok" before the primary streams to it: StartReplicated
		// has waited for that.
		replicas, err := sc.Replicas(ctx, SentinelMaster).Result()
		if err == nil && len(replicas) == 1 && replicas[0]["flags"] == "slave" && replicas[0]["master-link-status"] == "ok" {
			return s
		}
		if !pause(ctx, 50*time.Millisecond) {
			t.Fatalf("redistest: the sentinel does not know the replica %s after 30s: %v %v", replica, replicas, err)
		}
	}
}

// Client returns a go-redis failover client of the sentinel's master,
// with the settings docs/leases.md gives, closed at cleanup.
func (s *Sentinel) Client() *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: []string{s.Sentinel.Addr},
		MaxRetries: 1, ContextTimeoutEnabled: true, DialerRetries: 1, DialTimeout: time.Second})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// URL is the sentinel's REDIS_SENTINEL_URL, as [redis.ParseFailoverURL]
// reads it.
func (s *Sentinel) URL() string {
	return fmt.Sprintf("redis://%s?master_name=%s", s.Sentinel.Addr, SentinelMaster)
}

// Primary returns the server the sentinel names master.
func (s *Sentinel) Primary(ctx context.Context) *Server {
	s.t.Helper()
	sc := s.sentinelClient()
	defer sc.Close()
	addr, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
	if err != nil {
		s.t.Fatalf("redistest: SENTINEL GET-MASTER-ADDR-BY-NAME: %v", err)
	}
	for _, srv := range s.servers {
		if srv.Port == atoi(addr[1]) {
			return srv
		}
	}
	s.t.Fatalf("redistest: the sentinel names %v master, neither of its servers", addr)
	return nil
}

// Failover has the sentinel promote the replica (SENTINEL FAILOVER, as an
// operator's planned failover, started once the replica has caught up)
// and waits until it names it master, which is when go-redis's failover
// clients switch to it. It returns the new primary.
func (s *Sentinel) Failover(ctx context.Context) *Server {
	s.t.Helper()
	old := s.Primary(ctx)
	s.waitCaughtUp(ctx, old)
	sc := s.sentinelClient()
	defer sc.Close()
	if err := sc.Failover(ctx, SentinelMaster).Err(); err != nil {
		s.t.Fatalf("redistest: SENTINEL FAILOVER: %v", err)
	}
	return s.waitPromoted(ctx, old)
}

// FailoverKilled SIGKILLs the primary, as a crash does, once the replica
// has caught up with it, and waits until the sentinel, having found it
// down (down-after-milliseconds, 1 s here), names the replica master. It
// returns the new primary and when the old one was killed.
func (s *Sentinel) FailoverKilled(ctx context.Context) (*Server, time.Time) {
	s.t.Helper()
	return s.failWith(ctx, (*Server).Kill)
}

// FailoverPaused is [Sentinel.FailoverKilled] with the primary paused
// (SIGSTOP), as a hung host or a partition leaves it: its port takes
// connections and answers nothing. It stays paused until
// [Server.Resume]; cleanup kills it.
func (s *Sentinel) FailoverPaused(ctx context.Context) (*Server, time.Time) {
	s.t.Helper()
	return s.failWith(ctx, (*Server).Pause)
}

func (s *Sentinel) failWith(ctx context.Context, stop func(*Server)) (*Server, time.Time) {
	s.t.Helper()
	old := s.Primary(ctx)
	s.waitCaughtUp(ctx, old)
	stopped := time.Now()
	stop(old)
	return s.waitPromoted(ctx, old), stopped
}

// waitCaughtUp waits until the replica has every write primary has made.
// Replication is asynchronous and a promotion does not wait for it: the
// writes of the last moments before a failure, on a busy machine, would be
// lost with the old primary, which is Redis's to lose and not what a test
// of a failover means (docs/leases.md, "Guarantees").
func (s *Sentinel) waitCaughtUp(ctx context.Context, primary *Server) {
	s.t.Helper()
	replica := s.servers[0]
	if replica == primary {
		replica = s.servers[1]
	}
	pc, rc := redis.NewClient(primary.options()), redis.NewClient(replica.options())
	defer pc.Close()
	defer rc.Close()
	want := replOffset(ctx, s.t, pc, "master_repl_offset")
	for replOffset(ctx, s.t, rc, "slave_repl_offset") < want {
		if !pause(ctx, 10*time.Millisecond) {
			s.t.Fatalf("redistest: replica %s has not caught up with %s: %v", replica, primary, ctx.Err())
		}
	}
}

// Demote points server, a primary the sentinel replaced, at primary
// (REPLICAOF), as an operator does right after a planned failover: the
// sentinel does it too, but only some 10 s later, and meanwhile the new
// primary has no replica and the old one takes the writes of clients that
// have not switched yet.
func (s *Sentinel) Demote(ctx context.Context, server, primary *Server) {
	s.t.Helper()
	c := redis.NewClient(server.options())
	defer c.Close()
	if err := c.ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(primary.Port)).Err(); err != nil {
		s.t.Fatalf("redistest: REPLICAOF on %s: %v", server, err)
	}
}

// WaitReplicating waits until server replicates from primary with its link
// up, as a demoted primary does once a sentinel has reconfigured it and it
// has synced, and returns when.
func (s *Sentinel) WaitReplicating(ctx context.Context, server, primary *Server) time.Time {
	s.t.Helper()
	return waitReplicating(ctx, s.t, server, primary)
}

// waitPromoted waits until the sentinel names a master other than old.
func (s *Sentinel) waitPromoted(ctx context.Context, old *Server) *Server {
	s.t.Helper()
	for {
		if p := s.Primary(ctx); p != old {
			return p
		}
		if !pause(ctx, 20*time.Millisecond) {
			s.t.Fatalf("redistest: the sentinel still names %s master: %v", old, ctx.Err())
		}
	}
}

func (s *Sentinel) sentinelClient() *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: s.Sentinel.Addr})
}

// replOffset reads field, a replication offset, from the INFO replication of c's server.
func replOffset(ctx context.Context, t testing.TB, c *redis.Client, field string) int64 {
	t.Helper()
	srv := c.Options().Addr
	info := c.InfoMap(ctx, "replication")
	if err := info.Err(); err != nil {
		t.Fatalf("redistest: INFO replication on %s: %v", srv, err)
	}
	n, err := strconv.ParseInt(info.Item("Replication", field), 10, 64)
	if err != nil {
		t.Fatalf("redistest: %s in INFO replication of %s: %v", field, srv, err)
	}
	return n
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
