package lease

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
				for _, s := range []*redis.Script{acquireScript, releaseScript, sessionScript, sessionRenewScript, sessionEndScript, probeScript} {
					hashes = append(hashes, s.Hash())
				}
				loaded, err := admin.ScriptExists(context.Background(), hashes...).Result()
				assert.NoError(t, err, "SCRIPT EXISTS %v", hashes)
				assert.NotContains(t, loaded, false, "SCRIPT EXISTS %v: want every script loaded at Start", hashes)
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
			require.NoError(t, err, "Acquire")
			return func(ctx context.Context) error {
				if err := l.Release(ctx); err != nil {
					return err
				}
				assert.Zero(t, admin.Exists(context.Background(), l.key).Val(), "key exists after Release; want deleted")
				return nil
			}
		}},
		{"owner", func(t *testing.T, m *Manager) func(context.Context) error {
			startAndCleanup(t, m)
			_, err := m.Acquire(context.Background(), "slow-owner")
			require.NoError(t, err, "Acquire")
			return func(ctx context.Context) error {
				_, err := m.Owner(ctx, "slow-owner")
				return err
			}
		}},
		{"release hook", func(t *testing.T, m *Manager) func(context.Context) error {
			startAndCleanup(t, m)
			_, err := m.Acquire(context.Background(), "slow-hook")
			require.NoError(t, err, "Acquire")
			return func(ctx context.Context) error {
				if err := m.ReleaseHook().Run(ctx); err != nil {
					return err
				}
				assert.Zero(t, admin.Exists(context.Background(), m.nodeKey()).Val(), "session left after the Release hook; want ended")
				return nil
			}
		}},
		{"stop", func(t *testing.T, m *Manager) func(context.Context) error {
			startAndCleanup(t, m)
			return func(ctx context.Context) error {
				if err := m.Stop(ctx); err != nil {
					return err
				}
				assert.Zero(t, admin.Exists(context.Background(), m.nodeKey()).Val(), "session left after Stop; want ended")
				return nil
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.TTL = 3 * time.Second
			m, err := New(newClient(), cfg)
			require.NoError(t, err, "New")
			step := tt.setup(t, m)
			// Two calls' worth: with the last renewal up to RenewInterval
			// (TTL/6) before it, the session's TTL·2/3 keeps a sixth of a
			// TTL to spare.
			pause := 2 * m.cfg.CallTimeout
			require.NoError(t, admin.Do(context.Background(), "CLIENT", "PAUSE", pause.Milliseconds(), "ALL").Err(), "CLIENT PAUSE")
			t.Cleanup(func() { _ = admin.Do(context.Background(), "CLIENT", "UNPAUSE").Err() })
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			defer cancel()
			require.NoError(t, step(ctx), "%s while Redis is paused for %s (CallTimeout %s, budget %s)", tt.name, pause, m.cfg.CallTimeout, budget)
			if tt.name == "start" {
				t.Cleanup(func() { _ = m.Stop(context.Background()) })
			}
		})
	}
}

// startAndCleanup starts m and stops it at cleanup.
func startAndCleanup(t *testing.T, m *Manager) {
	t.Helper()
	require.NoError(t, m.Start(context.Background()), "Start")
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
}
