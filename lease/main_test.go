package lease

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/drainkit/drainkit/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// backend is a Redis deployment the contract runs against.
type backend struct {
	name   string
	client func(hooks ...redis.Hook) redis.UniversalClient
}

// standalone starts a redis-server; its clients follow the lease rules
// (one retry at most, context deadlines honoured).
func standalone(t *testing.T) backend {
	s := redistest.Start(t)
	return backend{name: "standalone", client: func(hooks ...redis.Hook) redis.UniversalClient {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: 1, ContextTimeoutEnabled: true})
		for _, h := range hooks {
			c.AddHook(h)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}}
}

// cluster starts a 3-node Redis Cluster.
func cluster(t *testing.T) backend {
	cl := redistest.StartCluster(t)
	return backend{name: "cluster", client: func(hooks ...redis.Hook) redis.UniversalClient {
		c := cl.ClientWith(&redis.ClusterOptions{MaxRetries: 1, ContextTimeoutEnabled: true})
		for _, h := range hooks {
			c.AddHook(h)
		}
		return c
	}}
}

var nodeSeq atomic.Int64

// testConfig is a 1 s TTL config with a unique node id.
func testConfig() Config {
	n := nodeSeq.Add(1)
	return Config{Node: fmt.Sprintf("node-%d", n), Addr: fmt.Sprintf("10.0.0.%d:7000", n), TTL: time.Second}
}

// startManager creates and starts a Manager, stopped at cleanup.
func startManager(t *testing.T, c redis.UniversalClient, cfg Config) *Manager {
	t.Helper()
	m, err := New(c, cfg)
	require.NoError(t, err, "New")
	require.NoError(t, m.Start(context.Background()), "Start")
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	return m
}

// waitFor polls Redis-side state until cond holds; polling is how one
// observes an external process (key expiry) without a notification.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !eventually(t, what, cond) {
		t.FailNow()
	}
}

// eventually is waitFor for goroutines other than the test's, where
// FailNow must not run: it fails t and returns false if cond never held.
// assert.Eventually is not used: it runs cond on a goroutine of its own,
// which outlives a timeout, and some conds call require themselves.
func eventually(t assert.TestingT, what string, cond func() bool) bool {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return assert.Fail(t, "timed out waiting for "+what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// pipelineHook intercepts pipelines (renewal rounds) with fn.
type pipelineHook struct {
	fn func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error
}

func (pipelineHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (pipelineHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (h pipelineHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { return h.fn(ctx, cmds, next) }
}

// cmdHook intercepts single commands with fn.
type cmdHook struct {
	fn func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error
}

func (cmdHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h cmdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { return h.fn(ctx, cmd, next) }
}
func (cmdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// loseReplyOnce is a hook that, once armed, lets the next command match
// accepts run and then reports its reply lost (a timeout): the server
// applied it, the caller never hears. That command disarms it.
func loseReplyOnce(armed *atomic.Bool, match func(redis.Cmder) bool) cmdHook {
	return cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		err := next(ctx, cmd)
		if err == nil && match(cmd) && armed.CompareAndSwap(true, false) {
			return fmt.Errorf("reply lost: %w", context.DeadlineExceeded)
		}
		return err
	}}
}

// countCommands counts every single command sent through the client.
func countCommands(n *atomic.Int32) cmdHook {
	return cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		n.Add(1)
		return next(ctx, cmd)
	}}
}

// isLost reports what a holder reads from its lease's context: ended, and
// not by a release (lost, or left to expire by the drain or by Stop).
func isLost(l *Lease) bool {
	return l.Context().Err() != nil && !errors.Is(context.Cause(l.Context()), ErrReleased)
}
