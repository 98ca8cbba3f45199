package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Acquire takes the lease on room id, or returns the one this Manager
// holds. Concurrent calls for a room share one script call; a lease every
// caller gave up on is released. Errors: a bad id, [ErrDraining],
// [ErrNotRunning], one matching [ErrHeld] naming the holder, the Redis
// error, or ctx's.
func (m *Manager) Acquire(ctx context.Context, id string) (*Lease, error) {
	if err := validateID(id); err != nil {
		return nil, err
	}
	if m.draining() {
		return nil, ErrDraining
	}
	if l, err := m.local(ctx, id); l != nil || err != nil {
		return l, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lease: acquire %s: %w", m.routeKey(id), err)
	}
	f, err := m.join(ctx, id)
	if err != nil {
		return nil, err
	}
	select {
	case <-f.done:
		return f.lease, f.err
	case <-ctx.Done():
	}
	if !m.leave(f) { // decided meanwhile: the lease is this caller's
		<-f.done
		return f.lease, f.err
	}
	return nil, fmt.Errorf("lease: acquire %s: %w", m.routeKey(id), ctx.Err())
}

// local returns the lease held for id, if any, or ErrNotRunning. An
// overdue lease is ended, and one ending is waited for: its holder must
// stop before the room gets a new fence.
func (m *Manager) local(ctx context.Context, id string) (*Lease, error) {
	for {
		m.mu.Lock()
		l := m.leases[id]
		switch {
		case !m.running:
			m.mu.Unlock()
			return nil, ErrNotRunning
		case l == nil || l.held():
			m.mu.Unlock()
			return l, nil
		case !l.ended():
			m.mu.Unlock()
			l.end(m.overdueError(l, m.now()), true) // leaves the set on return, unless another goroutine ended it first
			continue
		}
		if m.leftSet == nil {
			m.leftSet = make(chan struct{})
		}
		left, stopping := m.leftSet, m.stopReq
		m.mu.Unlock()
		select {
		case <-left:
		case <-stopping: // the loop returns ErrNotRunning
		case <-ctx.Done():
			return nil, fmt.Errorf("lease: acquire %s: waiting for the lost lease to end: %w", m.routeKey(id), ctx.Err())
		}
	}
}

// acquire runs the acquire script and returns the new lease, unregistered.
// ctx must not be cancellable, so a lease an attempt took comes back.
func (m *Manager) acquire(ctx context.Context, id string, stillWanted func() error) (*Lease, error) {
	var (
		sent    time.Time
		res     []any
		unknown time.Time // when the last attempt whose reply was lost was sent
	)
	err := m.retry(ctx, stillWanted, func(ctx context.Context) (err error) {
		sent = m.now()
		res, err = m.acquireCall(ctx, id)
		if err != nil && retryable(err) {
			unknown = sent
		}
		return err
	})
	if errors.Is(err, errShortWait) { // taken on the primary only: undo it
		unknown = sent
	}
	if err != nil {
		if !unknown.IsZero() {
			if rerr := m.releaseUnknown(ctx, id, unknown); rerr != nil {
				err = errors.Join(err, rerr) // the key expires within TTL
			}
		}
		return nil, fmt.Errorf("lease: acquire %s: %w", m.routeKey(id), err)
	}
	code, val, err := acquireReply(res)
	if err != nil {
		return nil, fmt.Errorf("lease: acquire %s: %w", m.routeKey(id), err)
	}
	if code == 0 {
		node, fence, _ := parseValue(val)
		return nil, heldBy(id, node, fence)
	}
	fence, err := strconv.ParseInt(val, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("lease: acquire %s: fence %q: %w", m.routeKey(id), val, err)
	}
	return m.newLease(id, fence, m.prefix+val, sent), nil
}

// acquireCall runs the acquire script and, with Config.WaitReplicas, WAIT
// in one pipeline to the room's primary (WAIT counts its connection's
// writes); a short WAIT returns the reply with errShortWait.
func (m *Manager) acquireCall(ctx context.Context, id string) ([]any, error) {
	keys := []string{m.routeKey(id), m.fenceKey(id)}
	args := m.acquireArgs
	n := m.cfg.WaitReplicas
	if n == 0 {
		return acquireScript.Run(ctx, m.client, keys, args...).Slice()
	}
	var c redis.Cmdable = m.client
	if cl, ok := m.client.(*redis.ClusterClient); ok {
		primary, err := cl.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, err
		}
		c = primary
	}
	// Half the call's time for the replicas, the rest for the round trip.
	timeout := m.cfg.CallTimeout / 2
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d)/2, time.Millisecond)
	}
	// EVAL, not EVALSHA: this rare path is not worth a NOSCRIPT fallback.
	pipe := c.Pipeline()
	cmd := acquireScript.Eval(ctx, pipe, keys, args...)
	wait := pipe.Do(ctx, "WAIT", n, timeout.Milliseconds())
	_, _ = pipe.Exec(ctx) // errors are read from each command
	res, err := cmd.Slice()
	if cl, ok := m.client.(*redis.ClusterClient); ok && err != nil &&
		(redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")) {
		cl.ReloadState(ctx) // sent to a primary directly: the retry finds the slot's owner
	}
	if err != nil {
		return nil, err
	}
	if code, _, _ := acquireReply(res); code == 0 {
		return res, nil // someone else's: nothing of ours to replicate
	}
	acked, err := wait.Int64()
	if err != nil {
		return res, fmt.Errorf("%w: WAIT: %w", errShortWait, err)
	}
	if acked < int64(n) {
		return res, fmt.Errorf("%w: %d of Config.WaitReplicas %d within %s", errShortWait, acked, n, timeout)
	}
	return res, nil
}

// errShortWait: fewer replicas than Config.WaitReplicas acknowledged.
var errShortWait = errors.New("replicas did not acknowledge in time")

// acquireReply decodes {code, fence-or-value}.
func acquireReply(res []any) (int64, string, error) {
	if len(res) != 2 {
		return 0, "", fmt.Errorf("unexpected reply %v", res)
	}
	code, ok1 := res[0].(int64)
	val, ok2 := res[1].(string)
	if !ok1 || !ok2 {
		return 0, "", fmt.Errorf("unexpected reply %v", res)
	}
	return code, val, nil
}

// parseValue splits node|holder|fence; ok is false for anything else.
func parseValue(v string) (node string, fence int64, ok bool) {
	parts := strings.Split(v, "|")
	if len(parts) != 3 || parts[0] == "" {
		return "", 0, false
	}
	f, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || f <= 0 {
		return "", 0, false
	}
	return parts[0], f, true
}
