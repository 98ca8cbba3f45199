package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Acquire takes the lease on room id, or returns the one this Manager
// holds, also once the drain began (until the hand-off takes it).
// Concurrent calls for a room share one acquisition; a lease every caller
// gave up on is released. Failed calls are retried until ctx ends (a TTL
// if it has no deadline). An error matches:
//   - [ErrHeld], naming the holder, also once the drain began: forward the room;
//   - [ErrDraining] for a room the hand-off has or that this draining node
//     does not hold (the error says if its holder could not be looked up),
//     and for any room once the Release hook ran;
//   - [ErrLost] if the node's session was lost during the acquisition or
//     not started again within a TTL, and then once more (one is waited out);
//   - ctx's, saying what it waited out (the last attempt's error, or the
//     session's start), [ErrNotRunning] or [ErrInvalidID];
//   - or it is Redis's, names Config.WaitReplicas, or says the replies of
//     its attempts were lost (the room is free: try again).
func (m *Manager) Acquire(ctx context.Context, id string) (*Lease, error) {
	if err := validateID(id); err != nil {
		return nil, err
	}
	end, ok := ctx.Deadline()
	if !ok {
		end = time.Now().Add(m.cfg.TTL) // retry's bound without a deadline
	}
	for {
		l, f, err := m.attach(ctx, end, id)
		if err == errGateClosed {
			return nil, m.holderOnceDraining(ctx, id)
		}
		if l != nil || err != nil {
			return l, err
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			if m.leave(f) {
				return nil, m.gaveUp(id, ctx.Err(), f.lastErr.Load())
			}
			<-f.done
		}
		switch {
		case f.lease == nil && errors.Is(f.err, ErrDraining): // the flip came during the acquisition
			return nil, m.holderOnceDraining(ctx, id)
		case f.lease == nil && errors.Is(f.err, context.DeadlineExceeded): // the flight's time ran out
			if f.end.Before(end) && ctx.Err() == nil && time.Now().Before(end) {
				if _, ok := ctx.Deadline(); !ok { // its TTL, as a deadline the next flight keeps to
					var cancel context.CancelFunc
					ctx, cancel = context.WithDeadline(ctx, end)
					defer cancel()
				}
				continue // an earlier caller's, and this caller has more
			}
			// This caller's: the same error as had its ctx ended first.
			return nil, m.gaveUp(id, cmp.Or(ctx.Err(), context.DeadlineExceeded), f.lastErr.Load())
		}
		return f.lease, f.err
	}
}

// gaveUp is the error of an Acquire whose ctx ended first: ctx's, with
// what the acquisition was waiting out (a failing attempt, or a session
// that does not start again), so that an outage names its cause.
func (m *Manager) gaveUp(id string, err error, last *error) error {
	var waited string
	switch startErr := m.startErr.Load(); {
	case last != nil:
		waited = fmt.Sprintf(" (last attempt: %v)", *last)
	case m.sess.Load() != nil:
	case startErr != nil:
		waited = fmt.Sprintf(" (waiting for the node's session to start again: %v)", *startErr)
	default:
		waited = " (waiting for the node's session to start again)"
	}
	return fmt.Errorf("lease: acquire %s: %w%s", m.routeKey(id), err, waited)
}

// holderOnceDraining is Acquire's error for a room this draining node
// does not hold: the holder's, matching ErrHeld, as before the flip;
// ErrDraining if nobody holds it, or if the look-up failed (within two
// calls' time), which the error then says: the room may be held. A route
// of this node that no lease has and that was not left to expire (an
// attempt that reached Redis after its acquisition gave up) is freed:
// nothing adopts it once draining, and Place would send the room's
// requests here.
func (m *Manager) holderOnceDraining(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*m.cfg.CallTimeout)
	defer cancel()
	o, err := m.Owner(ctx, id)
	switch {
	case err == nil && o.Node != m.cfg.Node:
		return heldBy(id, o.Node, o.Fence)
	case err == nil:
		m.mu.Lock()
		l, f, leftFence, s := m.leases[id], m.flights[id], m.left[id], m.sess.Load()
		m.mu.Unlock()
		if l == nil && f == nil && leftFence != o.Fence && s != nil { // the value names s's epoch, or the release changes nothing
			// Within ctx: the room's next Acquire tries again.
			if err := m.releaseUnknown(ctx, id, s.epoch, s.prefix+strconv.FormatInt(o.Fence, 10)); err != nil {
				return fmt.Errorf("lease: acquire %s: %w (freeing a route of this node that no lease has: %w)", m.routeKey(id), errGateClosed, err)
			}
		}
	case errors.Is(err, ErrHeld): // a value it cannot parse: never taken, so someone else's
		return err
	case err != nil && !errors.Is(err, ErrNotHeld):
		return fmt.Errorf("lease: acquire %s: %w (its holder is unknown: %v)", m.routeKey(id), errGateClosed, err)
	}
	return fmt.Errorf("lease: acquire %s: %w", m.routeKey(id), errGateClosed)
}

// acquire takes room id for f under the current session and returns the
// new, unregistered lease; a route of an ended session is taken at once.
// f.ctx ends only at its first caller's deadline: a caller leaving early
// stops no attempt midway, and one cut at the deadline is cleaned up after.
func (m *Manager) acquire(id string, f *flight) (*Lease, error) {
	ctx := f.ctx
	s, err := m.currentSession(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("lease: acquire %s: %w", m.routeKey(id), err)
	}
	stillWanted := func() error { // no attempt under a session this node no longer trusts
		if !m.alive(s.epoch, m.now()) {
			return lostError("its session ended while it was acquired")
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.unwanted(f)
	}
	// A route naming an ended session (its node's is gone or has another
	// epoch) is taken at once. The session is read outside the script
	// (another slot): safe, as an ended epoch never comes back
	// (docs/leases.md). A value of the earlier format is never dead here:
	// the script checks its TTL. One of this very session is nobody's (an
	// attempt whose reply was lost, a take-over's included: hence the
	// loop): this flight is the room's only one, and no lease of it is
	// registered.
	var code int64
	var val string
	args := s.args
	for range maxTakeOvers + 1 {
		code, val, err = m.acquireOnce(ctx, id, f, s, args, stillWanted)
		if err != nil || code != 0 { // val is not a route value
			break
		}
		node, epoch, _, ok := parseValue(val)
		if !ok {
			break
		}
		takeOver := strings.HasPrefix(val, s.prefix)
		if !takeOver {
			var sess nodeSession
			sess, err = m.nodeSession(ctx, node)
			takeOver = err == nil && sess.ended(epoch)
		}
		if !takeOver {
			break
		}
		args = []any{s.args[0], s.args[1], val, s.args[3]}
	}
	if err == nil && code == 0 && strings.HasPrefix(val, s.prefix) {
		// Every take-over's reply was lost: the route they left is nobody's.
		err = errors.New("the replies of its attempts were lost; the route they left is deleted")
		if rerr := m.releaseUnknown(context.WithoutCancel(ctx), id, s.epoch, ""); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("lease: acquire %s: %w", m.routeKey(id), err)
	}
	if code == 0 {
		node, _, fence, _ := parseValue(val)
		return nil, heldBy(id, node, fence)
	}
	fence, err := strconv.ParseInt(val, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("lease: acquire %s: fence %q: %w", m.routeKey(id), val, err)
	}
	return m.newLease(id, fence, s), nil
}

// maxTakeOvers bounds the take-overs of one acquisition: each follows a
// lost reply, or a route found dead.
const maxTakeOvers = 2

// acquireOnce runs the acquire script with args, retried, each attempt
// only while stillWanted. If it fails, any route value of this session
// goes: one a lost reply may have written, or the one found (args[2]) that
// this attempt was to take over: nobody holds either, and either would
// keep the room while the session lives. f.lastErr keeps each attempt's
// error for a caller that gives up first.
func (m *Manager) acquireOnce(ctx context.Context, id string, f *flight, s *session, args []any, stillWanted func() error) (int64, string, error) {
	var res []any
	var unknown bool     // an attempt's reply was lost
	err := stillWanted() // the flip may have come while a session or a route was read
	if err == nil {
		err = m.retry(ctx, stillWanted, func(ctx context.Context) (err error) {
			res, err = m.acquireCall(ctx, id, args)
			unknown = unknown || err != nil && retryable(err)
			if err != nil {
				f.lastErr.Store(&err)
			} else {
				f.lastErr.Store(nil)
			}
			return err
		})
	}
	if err != nil {
		found, _ := args[2].(string)
		if unknown || errors.Is(err, errShortWait) || strings.HasPrefix(found, s.prefix) { // errShortWait: taken on the primary only
			if rerr := m.releaseUnknown(context.WithoutCancel(ctx), id, s.epoch, ""); rerr != nil {
				err = errors.Join(err, rerr) // the route dies with the session
			}
		}
		return 0, "", err
	}
	return acquireReply(res)
}

// acquireCall runs the acquire script and, with Config.WaitReplicas, WAIT
// in one pipeline to the room's primary (WAIT counts its connection's
// writes); a short WAIT returns the reply with errShortWait.
func (m *Manager) acquireCall(ctx context.Context, id string, args []any) ([]any, error) {
	keys := []string{m.routeKey(id), m.fenceKey(id)}
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
	var wait *redis.Cmd
	var timeout time.Duration
	cmd := runPipelined(ctx, c, acquireScript, []scriptCall{{keys, args}}, func(p redis.Pipeliner) {
		// Half the call's time left for the replicas, the rest for the
		// round trip; again from what is left for a second pipeline.
		timeout = m.cfg.CallTimeout / 2
		if d, ok := ctx.Deadline(); ok {
			timeout = max(time.Until(d)/2, time.Millisecond)
		}
		wait = p.Do(ctx, "WAIT", n, timeout.Milliseconds())
	})[0]
	res, err := cmd.Slice()
	if err != nil {
		return nil, err // MOVED: the retry reloads the slot map; ASK (a migrating slot): retried until it moved
	}
	if code, _, _ := acquireReply(res); code == 0 {
		return res, nil // someone else's: nothing of ours to replicate
	}
	switch acked, err := wait.Int64(); {
	case err != nil:
		return res, fmt.Errorf("%w: WAIT for Config.WaitReplicas %d: %w", errShortWait, n, err)
	case acked < int64(n):
		return res, fmt.Errorf("%w: %d of Config.WaitReplicas %d within %s", errShortWait, acked, n, timeout)
	}
	return res, nil
}

// acquireReply decodes {code, fence-or-value}.
func acquireReply(res []any) (int64, string, error) {
	if len(res) == 2 {
		code, ok1 := res[0].(int64)
		val, ok2 := res[1].(string)
		if ok1 && ok2 {
			return code, val, nil
		}
	}
	return 0, "", fmt.Errorf("unexpected reply %v", res)
}

// parseValue splits a route value, node|epoch|fence (node|holder|fence in
// the earlier per-room format); ok is false for anything else.
func parseValue(v string) (node, epoch string, fence int64, ok bool) {
	node, rest, _ := strings.Cut(v, "|")
	epoch, f, ok := strings.Cut(rest, "|")
	fence, err := strconv.ParseInt(f, 10, 64) // fails on a fourth '|'
	if !ok || node == "" || err != nil || fence <= 0 {
		return "", "", 0, false
	}
	return node, epoch, fence, true
}
