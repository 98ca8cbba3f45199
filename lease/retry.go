package lease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// retry calls call until it succeeds, fails in a way another attempt
// cannot fix, or ctx ends; a ctx without a deadline ends after TTL, so
// nothing retries forever. Each attempt gets its own CallTimeout within
// ctx: CallTimeout bounds one call on a healthy server, and a loaded
// machine or a busy server makes some calls slower than that, which the
// caller's own budget (ctx) can still absorb. Between attempts it backs
// off, from CallTimeout/8 doubling up to CallTimeout, with jitter, so
// many nodes retrying at once do not arrive together.
//
// Calls retried this way must be safe to repeat: every lease script is
// (compare-and-set on our own value, or idempotent for the same holder).
func (m *Manager) retry(ctx context.Context, call func(ctx context.Context) error) error {
	return m.retryIf(ctx, nil, call)
}

// retryIf is retry with a check before every attempt after the first:
// once again returns an error, no further attempt starts and retryIf
// returns that error joined with the last attempt's. The first attempt
// always runs (within ctx).
func (m *Manager) retryIf(ctx context.Context, again func() error, call func(ctx context.Context) error) error {
	return m.attempts(ctx, ctx, again, call)
}

// retryDetached is retryIf for calls that must not be cut short: ctx's
// end stops further attempts, but an attempt under way keeps its own
// deadline (CallTimeout, within ctx's deadline) whatever happens to ctx,
// so what it did on the server comes back to the caller.
func (m *Manager) retryDetached(ctx context.Context, again func() error, call func(ctx context.Context) error) error {
	return m.attempts(ctx, context.WithoutCancel(ctx), again, call)
}

// attempts is the loop of retryIf and retryDetached: each attempt's
// context derives from parent, the wait between attempts from ctx. The
// overall end is computed once, not set as a context of its own: one
// context (and one timer) per attempt is all a call on the lease path
// pays, acquire and release alike.
func (m *Manager) attempts(ctx, parent context.Context, again func() error, call func(ctx context.Context) error) error {
	end, ok := ctx.Deadline()
	if !ok {
		end = time.Now().Add(m.cfg.TTL)
	}
	backoff := m.cfg.CallTimeout / 8
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithDeadline(parent, earlier(time.Now().Add(m.cfg.CallTimeout), end))
		err := call(cctx)
		cancel()
		if err == nil || !retryable(err) {
			return err
		}
		if !backOff(ctx, end, backoff/2+rand.N(backoff/2+1)) {
			if attempt > 1 {
				return fmt.Errorf("%w (%d attempts)", err, attempt)
			}
			return err
		}
		backoff = min(backoff*2, m.cfg.CallTimeout)
		if again != nil {
			if stop := again(); stop != nil {
				return fmt.Errorf("%w (after attempt %d: %w)", stop, attempt, err)
			}
		}
	}
}

// backOff waits d, and reports false if ctx ends or end passes first.
func backOff(ctx context.Context, end time.Time, d time.Duration) bool {
	left := time.Until(end)
	if left <= 0 {
		return false
	}
	wait := time.NewTimer(min(d, left))
	defer wait.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-wait.C:
		return d < left
	}
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// retryable reports whether err may pass on another attempt: the attempt
// timed out, the connection failed, or the server is temporarily unable
// to serve (loading, busy with a script, failing over, resharding; MOVED
// and ASK reach us only from calls sent to one Cluster node directly,
// which refresh the slot map first). A server's answer to the command
// itself, or an error of ours, is final.
func retryable(err error) bool {
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, redis.ErrPoolTimeout),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.As(err, &netErr):
		return true
	}
	for _, prefix := range []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "MOVED", "ASK"} {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return false
}
