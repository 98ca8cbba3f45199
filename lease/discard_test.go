package lease

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUnregisteredLeaseIsReleasedSilently: a lease acquired in Redis but
// never registered (a short WAIT while Stop cancels the acquisition, or
// every caller gave up) is released although the acquisition's context
// was cancelled, and fires no OnEnd: no caller ever saw it.
func TestUnregisteredLeaseIsReleasedSilently(t *testing.T) {
	tests := []struct {
		name         string
		waitReplicas int // 1 on a server without replicas: every WAIT is short
		// during runs while the acquire call is held: it may cancel the
		// caller (cancel) or stop the manager; it returns once the call
		// may go on, and a function to wait for the rest.
		during func(t *testing.T, m *Manager, cancel func()) (finish func())
	}{
		{"short WAIT while Stop waits for the acquisition", 1, func(t *testing.T, m *Manager, cancel func()) func() {
			stopped := make(chan error, 1)
			go func() { stopped <- m.Stop(context.Background()) }()
			waitFor(t, "Stop to begin", func() bool {
				m.mu.Lock()
				defer m.mu.Unlock()
				return m.stopped
			})
			return func() { assert.NoError(t, <-stopped, "Stop") }
		}},
		{"every caller gave up", 0, func(t *testing.T, m *Manager, cancel func()) func() {
			cancel()
			waitFor(t, "the caller to leave", func() bool {
				m.mu.Lock()
				defer m.mu.Unlock()
				for _, f := range m.flights {
					return f.waiters == 0
				}
				return false
			})
			return func() { settled(t, m) }
		}},
	}
	b := standalone(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("unseen-%d", i)
			entered, gate := make(chan struct{}), make(chan struct{})
			var armed atomic.Bool
			hold := func() {
				if armed.CompareAndSwap(true, false) {
					close(entered)
					<-gate
				}
			}
			hook := struct{ cmdHook }{cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				if isAcquire(cmd) {
					hold()
				}
				return next(ctx, cmd)
			}}}
			pipeHook := pipelineHook{fn: func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
				if len(cmds) > 0 && isAcquire(cmds[0]) {
					hold()
				}
				return next(ctx, cmds)
			}}
			c := b.client(hook, pipeHook)
			var ended atomic.Int32
			cfg := testConfig()
			cfg.TTL = 6 * time.Second // the held call must not time out by itself
			cfg.WaitReplicas = tt.waitReplicas
			cfg.OnEnd = func(*Lease, error) { ended.Add(1) }
			m := startManager(t, c, cfg)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			armed.Store(true)
			errc := make(chan error, 1)
			go func() { _, err := m.Acquire(ctx, id); errc <- err }()
			<-entered
			finish := tt.during(t, m, cancel)
			close(gate)
			err := <-errc
			require.Error(t, err, "Acquire: got a lease; want an error")
			require.NotErrorIs(t, err, context.DeadlineExceeded, "Acquire: want the call held, not timed out")
			finish()
			assert.Zero(t, c.Exists(context.Background(), m.routeKey(id)).Val(), "key exists; want the unregistered lease released")
			assert.Zero(t, ended.Load(), "OnEnd calls; want 0 for a lease never registered")
		})
	}
}

// TestLostAcquireReplyIsUndone: an attempt that took the room in Redis
// but whose reply was lost, followed by attempts that fail, must not leave
// the room held by this Manager under a fence nobody knows: the key is
// deleted (compare-holder) once the acquisition fails.
func TestLostAcquireReplyIsUndone(t *testing.T) {
	b := standalone(t)
	var attempts atomic.Int32
	hook := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if !isAcquire(cmd) {
			return next(ctx, cmd)
		}
		if attempts.Add(1) == 1 {
			_ = next(ctx, cmd) // applied in Redis…
		}
		return context.DeadlineExceeded // …but the reply is lost, and so is every later attempt
	}}
	c := b.client(hook)
	cfg := testConfig()
	cfg.TTL = 6 * time.Second // the key would otherwise outlive the test
	m := startManager(t, c, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := m.Acquire(ctx, "lost-reply")
	require.Error(t, err, "Acquire: got a lease; want an error")
	settled(t, m)
	require.GreaterOrEqual(t, attempts.Load(), int32(2), "acquire attempts; want a retry after the lost reply")
	assert.Empty(t, c.Get(context.Background(), m.routeKey("lost-reply")).Val(), "route key after the failed acquisition; want it deleted")
	assert.Empty(t, m.snapshot(), "Held()")
}
