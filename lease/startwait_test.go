package lease

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
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
			assert.Contains(t, logs.String(), "addr="+addr, "the waiting line names the address")
			for _, warning := range []string{"version", "maxmemory-policy"} {
				assert.NotContains(t, logs.String(), warning, "a warning built on a server never reached")
			}
			assert.False(t, errors.Is(err, ErrUnsafeServer), "got %v", err)
		})
	}
}
