package lease

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/drainkit/drainkit/internal/redistest"
)

// TestSlowRedis pauses a healthy redis-server (CLIENT PAUSE ALL) for
// longer than CallTimeout, then runs each step that has a budget of its
// own: the step must wait the pause out inside that budget, retrying
// calls that time out, instead of failing on a fixed CallTimeout.
func TestSlowRedis(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	newClient := func() redis.UniversalClient {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: 1, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	const budget = 10 * time.Second
	tests := []struct {
		name string
		// setup runs before the pause; step runs during it.
		setup func(t *testing.T, m *Manager) func(ctx context.Context) error
	}{
		{"start", func(t *testing.T, m *Manager) func(context.Context) error {
			return func(ctx context.Context) error {
				if err := m.Start(ctx); err != nil {
					return err
				}
				var hashes []string
				for _, s := range []*redis.Script{acquireScript, renewScript, releaseScript, heartbeatScript, heartbeatDeleteScript, probeScript} {
					hashes = append(hashes, s.Hash())
				}
				loaded, err := admin.ScriptExists(context.Background(), hashes...).Result()
				if err != nil || slices.Contains(loaded, false) {
					t.Errorf("SCRIPT EXISTS %v = %v, %v; want every script loaded at Start", hashes, loaded, err)
				}
				return nil
			}
		}},
		{"acquire", func(t *testing.T, m *Manager) func(context.Context) error {
			startAndCleanup(t, m)
			return func(ctx context.Context) error {
				_, err := m.Acquire(ctx, "slow-acquire")
				return err
			}
		}},
		{"release", func(t *testing.T, m *Manager) func(context.Context) error {
			startAndCleanup(t, m)
			l, err := m.Acquire(context.Background(), "slow-release")
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			return func(ctx context.Context) error {
				if err := l.Release(ctx); err != nil {
					return err
				}
				if n := admin.Exists(context.Background(), l.key).Val(); n != 0 {
					t.Errorf("key exists after Release; want deleted")
				}
				return nil
			}
		}},
		{"owner", func(t *testing.T, m *Manager) func(context.Context) error {
			startAndCleanup(t, m)
			if _, err := m.Acquire(context.Background(), "slow-owner"); err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			return func(ctx context.Context) error {
				_, err := m.Owner(ctx, "slow-owner")
				return err
			}
		}},
		{"release hook", func(t *testing.T, m *Manager) func(context.Context) error {
			startAndCleanup(t, m)
			if _, err := m.Acquire(context.Background(), "slow-hook"); err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			return func(ctx context.Context) error {
				if err := m.releaseAll(ctx); err != nil {
					return err
				}
				if n := admin.Exists(context.Background(), m.routeKey("slow-hook"), m.nodeKey()).Val(); n != 0 {
					t.Errorf("%d of the lease and heartbeat keys left after the Release hook; want both deleted", n)
				}
				return nil
			}
		}},
		{"stop", func(t *testing.T, m *Manager) func(context.Context) error {
			startAndCleanup(t, m)
			return func(ctx context.Context) error {
				if err := m.Stop(ctx); err != nil {
					return err
				}
				if n := admin.Exists(context.Background(), m.nodeKey()).Val(); n != 0 {
					t.Errorf("heartbeat left after Stop; want deleted")
				}
				return nil
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			m, err := New(newClient(), cfg)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			step := tt.setup(t, m)
			pause := 3 * m.cfg.CallTimeout // several calls' worth, well inside the leases' TTL·2/3
			if err := admin.Do(context.Background(), "CLIENT", "PAUSE", pause.Milliseconds(), "ALL").Err(); err != nil {
				t.Fatalf("CLIENT PAUSE: %v", err)
			}
			t.Cleanup(func() { _ = admin.Do(context.Background(), "CLIENT", "UNPAUSE").Err() })
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			defer cancel()
			if err := step(ctx); err != nil {
				t.Fatalf("%s while Redis is paused for %s (CallTimeout %s, budget %s): %v", tt.name, pause, m.cfg.CallTimeout, budget, err)
			}
			if tt.name == "start" {
				t.Cleanup(func() { _ = m.Stop(context.Background()) })
			}
		})
	}
}

// startAndCleanup starts m and stops it at cleanup.
func startAndCleanup(t *testing.T, m *Manager) {
	t.Helper()
	if err := m.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
}
