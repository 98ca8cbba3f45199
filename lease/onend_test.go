package lease

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// OnEnd must run while Redis still holds the room (its route and its
// session), for every way a lease ends here, so an audit log never shows
// the next owner first.
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
		n, err := c.Exists(context.Background(), "room:route:{"+l.ID()+"}", l.m.nodeKey()).Result()
		mu.Lock()
		defer mu.Unlock()
		ended[l.ID()], held[l.ID()] = cause, n
		if err != nil {
			held[l.ID()] = -1
		}
	}
	m := startManager(t, c, cfg)
	one, err := m.Acquire(ctx, "one")
	require.NoError(t, err)
	_, err = m.Acquire(ctx, "two")
	require.NoError(t, err)
	require.NoError(t, one.Release(ctx))
	require.NoError(t, m.ReleaseHook().Run(ctx))
	mu.Lock()
	defer mu.Unlock()
	for _, id := range []string{"one", "two"} {
		assert.ErrorIs(t, ended[id], ErrReleased, "lease %s: OnEnd cause", id)
		assert.Equal(t, int64(2), held[id], "lease %s: route and session that existed at OnEnd; want 2 (still held in Redis)", id)
	}
}
