package lease

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// panicOf runs fn and returns what it panicked with, nil if it returned.
func panicOf(fn func()) (v any) {
	defer func() { v = recover() }()
	fn()
	return nil
}

// TestPanickingHookStillEndsTheLease: a panic in OnLost or OnEnd, on any
// goroutine that ends a lease, is recovered and logged with the room id,
// and the end goes on: OnEnd still runs, the lease leaves the set (a later
// Acquire of the room gets a new lease), the other leases are still ended
// or renewed. Unrecovered on the renewer, it would crash the process.
func TestPanickingHookStillEndsTheLease(t *testing.T) {
	loseInRedis := func(t *testing.T, m *Manager, c redis.UniversalClient, l *Lease) {
		require.NoError(t, c.Del(context.Background(), m.nodeKey()).Err(), "DEL %s", m.nodeKey()) // the session ends
	}
	tests := []struct {
		name      string
		hook      string // the hook that panics: OnLost or OnEnd
		wantCause error
		// end ends l (and, for Stop, every lease); the hooks may run after
		// it returned, on the renewer.
		end func(t *testing.T, m *Manager, c redis.UniversalClient, l *Lease)
	}{
		{"OnLost on the renewer", "OnLost", ErrLost, loseInRedis},
		{"OnEnd on the renewer", "OnEnd", ErrLost, loseInRedis},
		{"OnEnd on the caller of Release", "OnEnd", ErrReleased, func(t *testing.T, m *Manager, c redis.UniversalClient, l *Lease) {
			assert.Nil(t, panicOf(func() { _ = l.Release(context.Background()) }), "Release panicked; want the hook's panic recovered")
		}},
		{"OnLost on Stop", "OnLost", ErrLeftToExpire, func(t *testing.T, m *Manager, c redis.UniversalClient, l *Lease) {
			_, err := m.HandOff(func(context.Context, *Lease) error { return nil }, 1) // whose hook never ran: Stop ends leases unflushed
			require.NoError(t, err)
			assert.Nil(t, panicOf(func() { _ = m.Stop(context.Background()) }), "Stop panicked; want the hook's panic recovered")
		}},
	}
	b := standalone(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := b.client()
			room := "panic-" + strings.ReplaceAll(tt.name, " ", "-")
			var (
				logs     logBuffer
				target   atomic.Pointer[Lease]
				mu       sync.Mutex
				endCalls = map[*Lease]int{}
				ended    = make(chan struct{}) // closed when the target's OnEnd is called
			)
			cfg := testConfig()
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			cfg.OnLost = func(l *Lease, _ error) {
				if tt.hook == "OnLost" {
					panic("OnLost of " + l.ID())
				}
			}
			cfg.OnEnd = func(l *Lease, _ error) {
				mu.Lock()
				endCalls[l]++
				mu.Unlock()
				if l == target.Load() {
					close(ended)
				}
				if tt.hook == "OnEnd" {
					panic("OnEnd of " + l.ID())
				}
			}
			m := startManager(t, c, cfg)
			ctx := context.Background()
			l, err := m.Acquire(ctx, room)
			require.NoError(t, err, "Acquire")
			target.Store(l)
			other, err := m.Acquire(ctx, room+"-other")
			require.NoError(t, err, "Acquire")

			tt.end(t, m, c, l)
			waitClosed(t, ended, "the lease's OnEnd")
			assert.ErrorIs(t, context.Cause(l.Context()), tt.wantCause, "cause")
			mu.Lock()
			assert.Equal(t, 1, endCalls[l], "OnEnd calls for the lease")
			mu.Unlock()
			if tt.wantCause == ErrLeftToExpire { // Stop: every lease ended, none left in the set
				assert.ErrorIs(t, context.Cause(other.Context()), ErrLeftToExpire, "other lease: cause after Stop")
				m.mu.Lock()
				n := len(m.leases)
				m.mu.Unlock()
				assert.Zero(t, n, "leases in the set after Stop")
			} else { // the lease left the set, after its hooks and the log
				actx, cancel := context.WithTimeout(ctx, 5*time.Second) // bounds a wait for a lease that never leaves
				defer cancel()
				again, err := m.Acquire(actx, room)
				require.NoError(t, err, "Acquire after the panic: want a new lease")
				assert.NotSame(t, l, again, "Acquire after the panic: want a new lease")
				assert.Greater(t, again.Token(), l.Token(), "Acquire after the panic: fence")
				renewed := m.okAt.Load()
				waitFor(t, "the renewer to renew the session again", func() bool { return m.okAt.Load() != renewed })
			}
			for _, want := range []string{"hook=" + tt.hook, "room=" + room + " ", "panic=\"" + tt.hook + " of " + room + "\""} {
				assert.Contains(t, logs.String(), want, "log")
			}
		})
	}
}
