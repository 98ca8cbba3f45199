package lease

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
	"github.com/drainkit/drainkit/internal/testlog"
)

// TestStartWithRedisUnreachable: a Start that waits on a closed port says
// so while it waits, naming the address and the refused connection, and
// ends, however its context ends (a start timeout or a signal's cancel),
// with an error that leads with the refused connection and still matches
// the context's: the same story every run, and no warning built on a
// server that was never reached.
func TestStartWithRedisUnreachable(t *testing.T) {
	tests := []struct {
		name      string
		ctx       func() (context.Context, context.CancelFunc)
		wantCtx   error
		wantWaits int // lines: one at the first failure (within a second), then every waitStartLogEvery
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 1500*time.Millisecond)
		}, context.DeadlineExceeded, 1},
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(waitStartLogEvery+2500*time.Millisecond, cancel) // a signal during the start
			return ctx, cancel
		}, context.Canceled, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) // nothing listens
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: 1, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			var logs bytes.Buffer
			cfg := testConfig()
			// Each attempt (CallTimeout, TTL/6) outlasts go-redis's own dial
			// retries (DialerRetries × DialerRetryTimeout, 500 ms): with a
			// shorter one, an attempt ends on its deadline before the dial
			// error comes back, and the start's error says only that.
			cfg.TTL = 10 * time.Second
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			m, err := New(c, cfg)
			require.NoError(t, err)
			ctx, cancel := tt.ctx()
			defer cancel()
			err = m.Start(ctx)
			require.Error(t, err, "Start against %s", addr)
			assert.ErrorIs(t, err, syscall.ECONNREFUSED, "got %v; want the refused connection first", err)
			assert.ErrorIs(t, err, tt.wantCtx, "got %v; want it to match how the start was ended", err)
			assert.True(t, strings.HasPrefix(err.Error(), "lease: start: check "+addr+": dial tcp"), "got %q; want it to lead with the dial error", err)

			waits := strings.Count(logs.String(), "lease: start waiting for Redis")
			assert.GreaterOrEqual(t, waits, tt.wantWaits, "waiting lines:\n%s", logs.String())
			assert.Contains(t, logs.String(), "redis_addr="+addr, "the waiting line names the address")
			for _, warning := range []string{"version", "maxmemory-policy"} {
				assert.NotContains(t, logs.String(), warning, "a warning built on a server never reached")
			}
			assert.False(t, errors.Is(err, ErrUnsafeServer), "got %v", err)
		})
	}
}

// TestStartWaitsForAClusterNotUpYet: a Cluster client whose seed does not
// answer yet at Start (a pod starting while its cluster restarts) is
// waited for, as a single server is: the slot map's load is retried, said
// in the waiting line, and the start goes on once the seed answers.
func TestStartWaitsForAClusterNotUpYet(t *testing.T) {
	cl := redistest.StartCluster(t)
	seed := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) // nothing listens yet
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{seed}, MaxRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	logs := &waitLines{waiting: make(chan struct{})}
	cfg := testConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	m, err := New(c, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	started := make(chan error, 1)
	go func() { started <- m.Start(ctx) }()
	select {
	case <-logs.waiting:
	case err := <-started:
		require.FailNow(t, "Start returned before the seed answered", "got %v; want it to wait", err)
	}
	assert.Contains(t, logs.String(), "redis_addr="+seed, "the waiting line names the seed")
	forward(t, seed, cl.Addrs[0])
	require.NoError(t, <-started, "Start once the seed answers")
	assert.Contains(t, logs.String(), `msg="lease manager started" node_id=`+cfg.Node+" forward_addr="+cfg.Addr+" redis_addr="+seed, "the start-up line")
	assert.Contains(t, logs.String(), "ttl=1s renew_interval=166.666666ms", "the start-up line")
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	_, err = m.Acquire(ctx, "after-the-wait")
	require.NoError(t, err, "Acquire")
}

// waitLines is a log sink that closes waiting at Start's first waiting line.
type waitLines struct {
	testlog.Buffer
	once    sync.Once
	waiting chan struct{}
}

func (w *waitLines) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p) // first: a test woken by waiting reads the line
	if bytes.Contains(p, []byte("lease: start waiting for Redis")) {
		w.once.Do(func() { close(w.waiting) })
	}
	return n, err
}

// forward listens on addr and relays each connection to to, until the
// test's cleanup closes the listener and every connection.
func forward(t *testing.T, addr, to string) {
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err, "listen on %s", addr)
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	track := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			down, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", to)
			if err != nil {
				_ = down.Close()
				continue
			}
			track(down)
			track(up)
			wg.Go(func() { _, _ = io.Copy(up, down); _ = up.Close() })
			wg.Go(func() { _, _ = io.Copy(down, up); _ = down.Close() })
		}
	})
}

// A client that reaches a replica (FailoverOptions.ReplicaOnly, which New
// cannot see, or a replica's address) is waited on as a failover would
// be, and the waiting line says what READONLY means and what to check.
func TestStartOnAReplicaSaysSo(t *testing.T) {
	primary := redistest.Start(t)
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))
	c := redis.NewClient(&redis.Options{Addr: replica.Addr, MaxRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	logs, err := startFor(t, c, testConfig(), time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "READONLY")
	assert.Contains(t, logs, "the server is a replica (FailoverOptions.ReplicaOnly, or a replica's address?)")
}

// replyErr is an error the server answered, as go-redis reports one.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// A start whose later attempts time out (a loaded machine, a server that
// slowed down) still names what the server answered before: READONLY,
// where the last attempt's timeout alone says nothing of the cause.
func TestStartsErrorKeepsTheServersLastAnswer(t *testing.T) {
	var calls atomic.Int64
	c := standalone(t).client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if !isScript(cmd, sessionScript) {
			return next(ctx, cmd)
		}
		if calls.Add(1) == 1 {
			cmd.SetErr(replyErr("READONLY You can't write against a read only replica."))
			return cmd.Err()
		}
		<-ctx.Done() // then no answer in time
		return ctx.Err()
	}})
	_, err := startFor(t, c, testConfig(), time.Second)
	require.Error(t, err)
	assert.ErrorContains(t, err, "the server's last answer: READONLY")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// startFor starts a Manager of cfg on c with a ctx that ends after d, and
// returns its logs and Start's error.
func startFor(t *testing.T, c redis.UniversalClient, cfg Config, d time.Duration) (string, error) {
	t.Helper()
	var logs testlog.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	m, err := New(c, cfg)
	require.NoError(t, err, "New")
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	err = m.Start(ctx)
	if err == nil {
		t.Cleanup(func() { _ = m.Stop(context.Background()) })
	}
	return logs.String(), err
}
