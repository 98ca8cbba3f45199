package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// stateDraining is the heartbeat's "state" field once the drain began
// ("active" before).
const stateDraining = "draining"

// Per-key replies of the renew and release scripts.
const (
	keyOurs  = 1
	keyGone  = 0
	keyTaken = -1
)

// renewLoop is the renewer. It wakes at each tick, at the earliest overdue
// deadline (a lease is given up in time even while a renewal hangs) and at
// the drain gate, to mark the heartbeat draining.
func (m *Manager) renewLoop(ctx context.Context, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	gate := m.gate
	next := m.now().Add(m.cfg.RenewInterval)
	timer := time.NewTimer(m.cfg.RenewInterval)
	defer timer.Stop()
	for {
		select {
		case <-stop:
			return
		case <-gate:
			gate = nil
			hbCtx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
			m.noteHeartbeat(m.writeHeartbeat(hbCtx, false)) // the next round writes it again if this fails
			cancel()
		case <-timer.C:
		}
		now := m.now()
		earliest := m.expireOverdue(now)
		if !now.Before(next) { // a round, bounded by CallTimeout and the earliest overdue deadline
			deadline := m.now().Add(m.cfg.CallTimeout)
			if !earliest.IsZero() && earliest.Before(deadline) {
				deadline = earliest
			}
			rctx, cancel := context.WithDeadline(ctx, deadline)
			if err := m.Renew(rctx); err != nil && rctx.Err() == nil {
				m.cfg.Logger.Debug("lease renewal round failed", "error", err)
			}
			cancel()
			next = now.Add(m.cfg.RenewInterval)
			earliest = m.expireOverdue(m.now())
		}
		wake := next
		if !earliest.IsZero() && earliest.Before(wake) {
			wake = earliest
		}
		timer.Reset(wake.Sub(m.now()))
	}
}

// expireOverdue ends every lease whose renewal is overdue and returns the
// earliest deadline of the others (zero if none).
func (m *Manager) expireOverdue(now time.Time) time.Time {
	var earliest time.Time
	for _, l := range m.snapshot(false) {
		if l.overdue(now, m.lostAfter) {
			l.end(m.overdueError(l, now), true)
			continue
		}
		if d := l.deadline(m.lostAfter); earliest.IsZero() || d.Before(earliest) {
			earliest = d
		}
	}
	return earliest
}

// overdueError is the cause of l, lost at now for want of a renewal.
func (m *Manager) overdueError(l *Lease, now time.Time) error {
	since := now.Sub(time.Unix(0, l.lastOK.Load()))
	return lostError(fmt.Sprintf("no renewal confirmed for %s (limit %s, TTL·2/3)",
		since.Truncate(time.Millisecond), m.lostAfter.Truncate(time.Millisecond)))
}

// Renew renews every held lease and the heartbeat, one pipeline per Redis
// primary sent together (a round trip each): the renewer's tick, for a caller that wants
// the leases confirmed now. A lease reported gone or taken is lost at once.
// Call it between Start and Stop only.
func (m *Manager) Renew(ctx context.Context) error {
	leases := m.snapshot(false)
	sent, start := m.now(), time.Now()
	// The heartbeat goes as EVAL: it is small, and needs no NOSCRIPT fallback.
	var hb *redis.Cmd
	heartbeat := func(pipe redis.Pipeliner) {
		hb = heartbeatScript.Eval(ctx, pipe, []string{m.nodeKey()}, m.heartbeatArgs()...)
	}
	calls, err := m.sendBatches(ctx, renewScript, m.batches(leases), heartbeat, m.cfg.TTL.Milliseconds())
	m.met.renewDuration.Observe(float64(time.Since(start).Microseconds()) / 1000)
	m.noteHeartbeat(hb.Err())
	m.followTopology(hb.Err())
	renewed := 0
	var errs []error
	for _, c := range calls {
		if c.err != nil {
			m.followTopology(c.err)
			errs = append(errs, c.err) // these leases keep their last confirmed time
			continue
		}
		for i, l := range c.leases {
			switch c.status[i] {
			case keyOurs:
				l.lastOK.Store(sent.UnixNano())
				renewed++
			case keyGone:
				l.end(lostError("expired in Redis"), true)
			case keyTaken:
				l.end(lostError("taken by another holder"), true)
			}
		}
	}
	m.met.renewed.Add(float64(renewed))
	if err == nil && len(errs) > 0 {
		err = fmt.Errorf("lease: renew: %w", errors.Join(errs...))
	}
	return err
}

// heartbeatArgs are the heartbeat script's ARGV.
func (m *Manager) heartbeatArgs() []any {
	state := "active"
	if m.draining() {
		state = stateDraining
	}
	return []any{m.holder, state, m.cfg.Addr, m.cfg.TTL.Milliseconds()}
}

// writeHeartbeat writes the heartbeat; at start it warns of one left by
// another process with our node id.
func (m *Manager) writeHeartbeat(ctx context.Context, start bool) error {
	prev, err := heartbeatScript.Run(ctx, m.client, []string{m.nodeKey()}, m.heartbeatArgs()...).Text()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("heartbeat %s: %w", m.nodeKey(), err)
	}
	if start && prev != m.holder {
		m.cfg.Logger.Warn("node heartbeat belonged to another process; another process may use the same node id, or a previous one did not stop cleanly",
			"node_id", m.cfg.Node, "key", m.nodeKey())
	}
	return nil
}

// noteHeartbeat counts a failed heartbeat write (redis.Nil, no previous
// holder, is a success) and logs changes only.
func (m *Manager) noteHeartbeat(err error) {
	if errors.Is(err, redis.Nil) {
		err = nil
	}
	if err != nil {
		m.met.heartbeatErrors.Inc()
	}
	m.mu.Lock()
	was := m.hbFailed
	m.hbFailed = err != nil
	m.mu.Unlock()
	switch {
	case err != nil && !was:
		m.cfg.Logger.Warn("node heartbeat write failed; other nodes may not forward to this one", "node_id", m.cfg.Node, "error", err)
	case err == nil && was:
		m.cfg.Logger.Info("node heartbeat written again", "node_id", m.cfg.Node)
	}
}

// deleteHeartbeat deletes the heartbeat if it is still ours.
func (m *Manager) deleteHeartbeat(ctx context.Context) error {
	m.mu.Lock()
	started := m.started
	m.mu.Unlock()
	if !started { // a start that failed: no heartbeat of ours, nothing to tell Redis
		return nil
	}
	err := m.retry(ctx, nil, func(ctx context.Context) error {
		return heartbeatDeleteScript.Run(ctx, m.client, []string{m.nodeKey()}, m.holder).Err()
	})
	if err != nil {
		return fmt.Errorf("lease: delete heartbeat %s: %w", m.nodeKey(), err)
	}
	return nil
}
