package redistest

import (
	"context"
	"fmt"
	"testing"
)

func TestStartCluster(t *testing.T) {
	c := StartCluster(t)
	cl := c.Client()
	ctx := context.Background()
	// Keys spread over every node: writing and reading them back exercises
	// redirects and proves all slots are served.
	for i := range 100 {
		k := fmt.Sprintf("k%d", i)
		if err := cl.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatalf("set %s: %v", k, err)
		}
	}
	used := map[string]bool{}
	for i := range 100 {
		k := fmt.Sprintf("k%d", i)
		slot := int(cl.ClusterKeySlot(ctx, k).Val())
		used[c.Addrs[min(slot/(clusterSlots/3), 2)]] = true
		if got, err := cl.Get(ctx, k).Int(); err != nil || got != i {
			t.Fatalf("get %s = %d, %v; want %d, nil", k, got, err, i)
		}
	}
	if len(used) != 3 {
		t.Fatalf("keys landed on %d nodes; want 3", len(used))
	}
}
