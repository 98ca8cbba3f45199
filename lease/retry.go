package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/drainkit/drainkit/internal/redischeck"
)

// retry calls call until it succeeds, fails for good, ctx ends (after TTL
// without a deadline) or again (if set) refuses a retry. Each attempt gets
// CallTimeout; backoff rises to it from CallTimeout/8 with jitter, so nodes
// do not retry in step (every script is safe to repeat). When ctx ends, the
// error leads with the last own failure (what an operator must fix), adds
// the server's last answer if that was another (READONLY, before calls
// that then timed out), and still matches ctx's.
func (m *Manager) retry(ctx context.Context, again func() error, call func(ctx context.Context) error) error {
	end, ok := ctx.Deadline()
	if !ok {
		end = time.Now().Add(m.cfg.TTL)
	}
	backoff := m.cfg.CallTimeout / 8
	var cause error        // the last failure that was not ctx's ending
	var answer redis.Error // the last failure the server answered
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, min(m.cfg.CallTimeout, time.Until(end)))
		err := call(cctx)
		cancel()
		cutShort := ctx.Err() != nil // this attempt's error may be ctx's, not the server's
		if err != nil && !cutShort {
			cause = err
		}
		if reply := redis.Error(nil); errors.As(err, &reply) {
			answer = reply
		}
		if err == nil || !retryable(err) && !cutShort {
			return err
		}
		m.followTopology(err)
		wait, left := backoff/2+rand.N(backoff/2+1), time.Until(end)
		select {
		case <-ctx.Done():
		case <-time.After(min(wait, left)):
		}
		if ctx.Err() != nil || wait >= left {
			last := cmp.Or(cause, err)
			// No cause: the next attempt would start past the deadline, which ended it.
			ended := cmp.Or(context.Cause(ctx), context.DeadlineExceeded)
			told := ""
			if lastReply := redis.Error(nil); answer != nil && (!errors.As(last, &lastReply) || lastReply.Error() != answer.Error()) {
				told = "; the server's last answer: " + answer.Error()
			}
			if errors.Is(last, ended) {
				return fmt.Errorf("%w (%d attempts%s)", last, attempt, told)
			}
			return fmt.Errorf("%w (%d attempts, then %w%s)", last, attempt, ended, told)
		}
		backoff = min(backoff*2, m.cfg.CallTimeout)
		if again != nil {
			if stop := again(); stop != nil {
				// %v: the attempt's error is context, not a second cause
				// (a timeout in it would read as the caller's ctx ending).
				return fmt.Errorf("%w (after attempt %d: %v)", stop, attempt, err)
			}
		}
	}
}

// followTopology has a Cluster client follow a failover
// ([redischeck.FollowFailover]) after a retryable failure.
func (m *Manager) followTopology(err error) {
	if retryable(err) {
		redischeck.FollowFailover(m.client)
	}
}

// whileSession stops retries once the session of epoch is no longer
// current: a route under an ended session needs no release, and its error
// matches ErrNotHeld, as a release that found the session ended first.
func (m *Manager) whileSession(epoch int64) func() error {
	return func() error {
		if s := m.sess.Load(); s != nil && s.epoch == epoch {
			return nil
		}
		return fmt.Errorf("its session ended, no retry: %w", ErrNotHeld)
	}
}

// retryable reports whether err may pass on another attempt: a timeout, a
// failed connection, another process's expiring session (a restart after a
// crash), a server briefly unable to serve (MOVED, ASK: direct calls only),
// a cluster still forming (slots not all served, or none yet) or whose
// slot map names a failed node (go-redis from v9.24 refuses to send to it
// until a reload maps the slot to its promoted replica), or sentinels that
// do not name the master (yet).
func retryable(err error) bool {
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, errSessionBusy),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, redischeck.ErrSlotsUncovered), errors.Is(err, redis.ErrClusterTopologyUnhealthy),
		redischeck.NoMaster(err), errors.As(err, &netErr):
		return true
	}
	if strings.Contains(err.Error(), "redis: cluster has no nodes") { // go-redis's, unexported: a cluster with no slot assigned yet (New refuses no seeds)
		return true
	}
	for _, prefix := range []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "MOVED", "ASK"} {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return false
}
