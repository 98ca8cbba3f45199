package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// StartReplicated starts a primary and one replica of it, and returns once
// the primary counts the replica online (synced and acknowledging, so that
// WAIT counts it, and a failover promotes a replica with every write). Both
// sync a replica at once rather than waiting for more to join
// (repl-diskless-sync-delay 0, not Redis's 5 s): the replica too, as a
// primary once promoted, to which the old primary rejoins.
func StartReplicated(t testing.TB) (primary, replica *Server) {
	t.Helper()
	primary = Start(t, "--repl-diskless-sync-delay", "0")
	replica = Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port), "--repl-diskless-sync-delay", "0")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pc := redis.NewClient(primary.options())
	defer pc.Close()
	for !streaming(ctx, pc) {
		if !pause(ctx, 10*time.Millisecond) {
			t.Fatalf("redistest: %s does not stream to its replica %s after 10s", primary, replica)
		}
	}
	return primary, replica
}

// streaming reports whether the primary behind pc counts its first replica
// online: it has acknowledged an offset since its sync.
func streaming(ctx context.Context, pc *redis.Client) bool {
	slave0 := pc.InfoMap(ctx, "replication").Item("Replication", "slave0") // ip=…,port=…,state=online,…
	return strings.Contains(slave0, "state=online")
}

// replicatesFrom reports whether the server behind c replicates from
// primary with its link up (synced), and INFO's error, if any.
func replicatesFrom(ctx context.Context, c *redis.Client, primary *Server) (bool, error) {
	info := c.InfoMap(ctx, "replication")
	return info.Item("Replication", "role") == "slave" && info.Item("Replication", "master_port") == strconv.Itoa(primary.Port) &&
		info.Item("Replication", "master_link_status") == "up", info.Err()
}

// waitReplicating waits until server replicates from primary with its link
// up, and returns when.
func waitReplicating(ctx context.Context, t testing.TB, server, primary *Server) time.Time {
	t.Helper()
	c := redis.NewClient(server.options())
	defer c.Close()
	for {
		ok, err := replicatesFrom(ctx, c, primary)
		if ok {
			return time.Now()
		}
		if !pause(ctx, 20*time.Millisecond) {
			t.Fatalf("redistest: %s does not replicate from %s: %v (last INFO error %v)", server, primary, ctx.Err(), err)
		}
	}
}
