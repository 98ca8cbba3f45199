package lease

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// OnEnd must run while Redis still holds the key, for every way a lease
// ends here, so an audit log never shows the next owner first.
func TestOnEndRunsBeforeRedisIsTold(t *testing.T) {
	b := standalone(t)
	c := b.client()
	ctx := context.Background()
	var (
		mu    sync.Mutex
		ended = map[string]error{}
		held  = map[string]int64{}
	)
	cfg := testConfig()
	cfg.OnEnd = func(l *Lease, cause error) {
		n, err := c.Exists(context.Background(), "room:route:{"+l.ID()+"}").Result()
		mu.Lock()
		defer mu.Unlock()
		ended[l.ID()], held[l.ID()] = cause, n
		if err != nil {
			held[l.ID()] = -1
		}
	}
	m := startManager(t, c, cfg)
	one, err := m.Acquire(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Acquire(ctx, "two"); err != nil {
		t.Fatal(err)
	}
	if err := one.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.releaseAll(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range []string{"one", "two"} {
		if !errors.Is(ended[id], ErrReleased) {
			t.Errorf("lease %s: OnEnd cause %v; want ErrReleased", id, ended[id])
		}
		if held[id] != 1 {
			t.Errorf("lease %s: key existed %d at OnEnd; want 1 (still held in Redis)", id, held[id])
		}
	}
}
