package lease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLostBeforeExpiry stops renewals reaching Redis (dropped at once, or
// delayed until the call's deadline) and checks that the holder is told
// while Redis still holds the key: the context first, then Lost(), then
// OnLost.
func TestLostBeforeExpiry(t *testing.T) {
	tests := []struct {
		name  string
		block func(ctx context.Context) error
	}{
		{"dropped", func(context.Context) error { return errors.New("renewal dropped") }},
		{"delayed", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }},
	}
	b := standalone(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var blocking atomic.Bool
			hook := pipelineHook{fn: func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
				if blocking.Load() {
					return tt.block(ctx)
				}
				return next(ctx, cmds)
			}}
			c := b.client(hook)
			type seen struct{ ctxDone, lostClosed bool }
			called := make(chan seen, 1)
			cfg := testConfig()
			cfg.OnLost = func(l *Lease, cause error) {
				called <- seen{ctxDone: l.Context().Err() != nil, lostClosed: isLost(l)}
			}
			m := startManager(t, c, cfg)
			ctx := context.Background()
			l, err := m.Acquire(ctx, "lost-"+tt.name)
			require.NoError(t, err, "Acquire")
			blocking.Store(true)

			select {
			case <-l.Context().Done():
			case <-time.After(cfg.TTL * 2):
				require.FailNowf(t, "lease context still open", "%s after renewals stopped; want cancelled within TTL·2/3", cfg.TTL*2)
			}
			require.True(t, isLost(l), "lease ended with cause %v; want lost", context.Cause(l.Context()))
			require.Positive(t, c.PTTL(ctx, l.key).Val(), "PTTL when Lost() closed: the holder must stop before Redis expires the key")
			require.Equal(t, seen{ctxDone: true, lostClosed: true}, <-called, "in OnLost: want the context done and the lease lost")
			require.ErrorIs(t, context.Cause(l.Context()), ErrLost, "cause")
		})
	}
}

// TestOverdue pins the loss rule: a lease is overdue once its last
// confirmed renewal was sent TTL·2/3 ago.
func TestOverdue(t *testing.T) {
	base := time.Unix(1000, 0)
	lostAfter := 2 * time.Second
	tests := []struct {
		give time.Duration // time since the last confirmed renewal was sent
		want bool
	}{
		{0, false},
		{lostAfter - time.Nanosecond, false},
		{lostAfter, true},
		{lostAfter + time.Hour, true},
	}
	for _, tt := range tests {
		l := &Lease{}
		l.lastOK.Store(base.UnixNano())
		assert.Equal(t, tt.want, l.overdue(base.Add(tt.give), lostAfter), "overdue after %s", tt.give)
		assert.WithinDuration(t, base.Add(lostAfter), l.deadline(lostAfter), 0, "deadline")
	}
}
