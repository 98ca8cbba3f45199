package lease

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
		if err := c.Del(context.Background(), l.key).Err(); err != nil {
			t.Fatalf("DEL %s: %v", l.key, err)
		}
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
			if v := panicOf(func() { _ = l.Release(context.Background()) }); v != nil {
				t.Errorf("Release panicked: %v; want the hook's panic recovered", v)
			}
		}},
		{"OnLost on Stop", "OnLost", ErrLeftToExpire, func(t *testing.T, m *Manager, c redis.UniversalClient, l *Lease) {
			if v := panicOf(func() { _ = m.Stop(context.Background()) }); v != nil {
				t.Errorf("Stop panicked: %v; want the hook's panic recovered", v)
			}
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
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			target.Store(l)
			other, err := m.Acquire(ctx, room+"-other")
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}

			tt.end(t, m, c, l)
			waitClosed(t, ended, "the lease's OnEnd")
			if cause := context.Cause(l.Context()); !errors.Is(cause, tt.wantCause) {
				t.Errorf("cause %v; want %v", cause, tt.wantCause)
			}
			mu.Lock()
			if n := endCalls[l]; n != 1 {
				t.Errorf("OnEnd ran %d times for the lease; want 1", n)
			}
			mu.Unlock()
			if tt.wantCause == ErrLeftToExpire { // Stop: every lease ended, none left in the set
				if !errors.Is(context.Cause(other.Context()), ErrLeftToExpire) {
					t.Errorf("other lease: cause %v after Stop; want ErrLeftToExpire", context.Cause(other.Context()))
				}
				m.mu.Lock()
				n := len(m.leases)
				m.mu.Unlock()
				if n != 0 {
					t.Errorf("%d leases in the set after Stop; want 0", n)
				}
			} else { // the lease left the set, after its hooks and the log
				actx, cancel := context.WithTimeout(ctx, 5*time.Second) // bounds a wait for a lease that never leaves
				defer cancel()
				again, err := m.Acquire(actx, room)
				if err != nil {
					t.Fatalf("Acquire after the panic: %v; want a new lease", err)
				}
				if again == l || again.Token() <= l.Token() {
					t.Errorf("Acquire after the panic: fence %d; want a new lease, fence above %d", again.Token(), l.Token())
				}
				renewed := other.lastOK.Load()
				waitFor(t, "the renewer to renew the other lease", func() bool { return other.lastOK.Load() != renewed })
			}
			for _, want := range []string{"hook=" + tt.hook, "room=" + room + " ", "panic=\"" + tt.hook + " of " + room + "\""} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log lacks %s; got:\n%s", want, logs.String())
				}
			}
		})
	}
}
