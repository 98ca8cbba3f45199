package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/drainkit/drainkit/internal/redischeck"
)

// session is one epoch of the node's session, room:node:{NODE}: every
// lease acquired under it hangs off it, and ends with it.
type session struct {
	epoch  int64
	prefix string // node|epoch|, the start of every route value written under it
	args   []any  // acquire.lua's ARGV for a room nobody holds: boxed once per epoch
}

// State of the session's "state" field.
const (
	stateActive   = "active"
	stateDraining = "draining"
)

// startSession starts a new epoch of the session, replacing this
// process's earlier one (its rooms are free at once), and makes it current.
// A current one past its deadline is lost first: this is where an overdue
// session ends, whoever found it overdue (the renewer, an Acquire).
func (m *Manager) startSession(ctx context.Context) error {
	m.startMu.Lock() // the renewer and an Acquire that found the session overdue may both start one
	defer m.startMu.Unlock()
	m.mu.Lock()
	s, stopped := m.sess.Load(), m.stopped
	m.mu.Unlock()
	switch {
	case stopped:
		return ErrNotRunning
	case s != nil && m.alive(s.epoch, m.now()):
		return nil // started meanwhile
	case s != nil: // overdue: its leases end before the next epoch frees their rooms
		m.loseLocked(s.epoch, m.lostCause(s.epoch))
	}
	// The call's own budget starts here, after the loss's hooks.
	ctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	defer context.AfterFunc(m.halt, cancel)() // Stop's ctx ended: it waits for this start
	again, sent := m.lastEpoch.Load() != 0, m.now()
	res, err := sessionScript.Run(ctx, m.client, []string{m.nodeKey()}, strconv.FormatInt(m.lastEpoch.Load(), 10),
		m.holder, m.state(), m.cfg.Addr, m.cfg.TTL.Milliseconds(), m.starts.Add(1)).Int64Slice()
	m.wrote(sent, err)
	switch {
	case err != nil && m.halt.Err() != nil: // applied or not, Stop's end of the session follows
		return fmt.Errorf("session %s: %w (%v)", m.nodeKey(), ErrNotRunning, err)
	case err != nil:
		return fmt.Errorf("session %s: %w", m.nodeKey(), err)
	case len(res) != 2:
		return fmt.Errorf("session %s: unexpected reply %v", m.nodeKey(), res)
	case res[0] == 0 && res[1] < 0: // PTTL: it never expires, so waiting is no use
		return fmt.Errorf("session %s has no TTL: no lease Manager wrote it (node id %q); delete it", m.nodeKey(), m.cfg.Node)
	case res[0] == 0:
		return fmt.Errorf("session %s: %w (node id %q; it expires in %dms)", m.nodeKey(), errSessionBusy, m.cfg.Node, res[1])
	}
	m.makeCurrent(res[1], sent)
	m.listSession(ctx, res[1])
	if again { // logged here, whoever started it: the renewer, or an Acquire that found it overdue
		m.cfg.Logger.Info("lease session started again", "node_id", m.cfg.Node, "epoch", res[1])
	} else {
		m.cfg.Logger.Debug("lease session started", "node_id", m.cfg.Node, "epoch", res[1])
	}
	return nil
}

// wrote notes a session write sent at sent, unless err says it never left
// (a refused connection, or no master named by the sentinels; go-redis
// returns the last send's error, so a first send applied just before Redis
// died is missed: rooms then wait for the session's expiry): Stop has
// nothing to end TTL + CallTimeout later.
func (m *Manager) wrote(sent time.Time, err error) {
	for !errors.Is(err, syscall.ECONNREFUSED) && !redischeck.NoMaster(err) {
		last := m.wroteAt.Load()
		if last != nil && !sent.After(*last) || m.wroteAt.CompareAndSwap(last, &sent) {
			return
		}
	}
}

// makeCurrent makes epoch, started at sent, the current session and wakes
// whoever waits for one (currentSession).
func (m *Manager) makeCurrent(epoch int64, sent time.Time) {
	s := &session{epoch: epoch, prefix: m.routePrefixOf(epoch)}
	s.args = []any{m.cfg.Node, strconv.FormatInt(epoch, 10), "", fenceRetention.Milliseconds()}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastEpoch.Store(epoch)
	m.okAt.Store(&sent)
	m.hbFailed.Store(false) // a new session: "renewed again" would be about the one lost
	m.startErr.Store(nil)   // whoever started it: the next outage's failed start is logged
	m.sess.Store(s)
	m.wakeSettled()
}

// routePrefixOf is node|epoch|, which starts every route value of epoch.
func (m *Manager) routePrefixOf(epoch int64) string {
	return m.cfg.Node + "|" + strconv.FormatInt(epoch, 10) + "|"
}

// alive reports whether the session of epoch is current and now before its deadline.
func (m *Manager) alive(epoch int64, now time.Time) bool {
	s := m.sess.Load()
	return s != nil && s.epoch == epoch && now.Before(m.deadline())
}

// deadline is when this node stops trusting its session: TTL·2/3 after the
// last confirmed renewal was sent, a third of a TTL before it could expire.
// It keeps the monotonic clock reading: a step of the wall clock back
// (NTP) must not let the node trust a session Redis has expired.
func (m *Manager) deadline() time.Time {
	return m.okAt.Load().Add(m.lostAfter)
}

// loseSession ends the session of epoch locally, if still current, and
// every lease under it with cause. The next one starts only once every
// lease has ended: it replaces this one in Redis, freeing its rooms.
func (m *Manager) loseSession(epoch int64, cause error) {
	m.startMu.Lock()
	defer m.startMu.Unlock()
	m.loseLocked(epoch, cause)
}

// loseLocked is loseSession with startMu held.
func (m *Manager) loseLocked(epoch int64, cause error) {
	m.mu.Lock()
	if s := m.sess.Load(); s == nil || s.epoch != epoch {
		m.mu.Unlock()
		return
	}
	m.sess.Store(nil)
	m.mu.Unlock()
	m.cfg.Logger.Warn("lease session lost: every room this node held is lost", "node_id", m.cfg.Node, "epoch", epoch, "cause", cause.Error())
	var leases []*Lease
	for _, l := range m.snapshot() {
		if l.epoch == epoch {
			leases = append(leases, l)
		}
	}
	// Every context first, then the hooks; all of them return before the epoch is replaced.
	m.endAll(leases, func(*Lease) error { return cause })
}

// currentSession returns the current session for f, waiting within ctx
// (at most TTL: a session lost is started again within a tick, or Redis is
// down) while one starts again; ErrLost past the TTL, and unwanted's error
// at once when f is (the flip, a stop, every caller gone). One past its
// deadline (a renewer starved of CPU) is lost and replaced: no room is
// taken under a distrusted session.
func (m *Manager) currentSession(ctx context.Context, f *flight) (*session, error) {
	m.mu.Lock()
	s, running := m.sess.Load(), m.running
	m.mu.Unlock()
	if running && s != nil && m.alive(s.epoch, m.now()) {
		return s, nil // the usual case, without the timer below
	}
	caller := ctx
	ctx, cancel := context.WithTimeout(ctx, m.cfg.TTL)
	defer cancel()
	for {
		m.mu.Lock()
		s, changed, stopping := m.sess.Load(), m.settledLocked(), m.stopReq
		unwanted := m.unwanted(f)
		m.mu.Unlock()
		switch {
		case unwanted != nil:
			return nil, unwanted
		case s != nil && m.alive(s.epoch, m.now()):
			return s, nil
		case s != nil: // overdue: startSession loses it first; a failed start is waited for below
			if err := m.retry(ctx, nil, m.startSession); err != nil && !retryable(err) {
				return nil, err
			}
			continue
		}
		select {
		case <-changed:
		case <-stopping:
		case <-m.gate:
		case <-ctx.Done():
			if caller.Err() != nil {
				return nil, fmt.Errorf("waiting for the node's session to start again: %w", caller.Err())
			}
			return nil, m.notStartedAgain()
		}
	}
}

// notStartedAgain is the error of a wait for the node's session that
// lasted a TTL: the session is lost, not the caller's time, so it matches
// ErrLost (an Acquire waits out one such loss), not ctx's errors, nor
// those of the last start, which it names.
func (m *Manager) notStartedAgain() error {
	err := lostError(fmt.Sprintf("the node's session did not start again within a TTL (%s)", m.cfg.TTL))
	if startErr := m.startErr.Load(); startErr != nil {
		return fmt.Errorf("%w: %v", err, *startErr)
	}
	return err
}

// renewLoop is the renewer: one call per RenewInterval extends the
// session, whatever the rooms held. It wakes at the session's deadline too
// (leases end in time while a renewal hangs) and at the drain gate. The
// last tick before the deadline comes a quarter interval ahead of it, not
// at it: a primary back by then (a failover) keeps the session. More tries
// would trip go-redis's dial cut-off sooner (a service's calls on the
// client may trip it anyway), which then refuses the new primary too until
// its background probe, once a second, gets through.
func (m *Manager) renewLoop(ctx context.Context, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	gate := m.gate
	timer := time.NewTimer(m.cfg.RenewInterval)
	defer timer.Stop()
	for {
		select {
		case <-stop:
			return
		case <-gate:
			gate = nil
		case <-timer.C:
		}
		if err := m.tick(ctx); err != nil && ctx.Err() == nil {
			m.cfg.Logger.Debug("lease session renewal failed", "error", err)
		}
		wake := m.cfg.RenewInterval
		if m.sess.Load() != nil {
			left := m.deadline().Sub(m.now())
			switch last := left - m.cfg.RenewInterval/4; {
			case wake < last:
			case last > 0:
				wake = last
			default:
				wake = left // the next tick loses the session
			}
		}
		timer.Reset(wake)
	}
}

// tick renews the session, or starts one if there is none or it is past
// its deadline; nil if renewed. A renewal that fails is bounded by the
// deadline: the renewer wakes there and the next tick loses the session.
func (m *Manager) tick(ctx context.Context) error {
	s := m.sess.Load()
	if s == nil || !m.now().Before(m.deadline()) {
		return m.restart(ctx) // startSession loses an overdue one first
	}
	rctx, cancel := context.WithTimeout(ctx, min(m.cfg.CallTimeout, m.deadline().Sub(m.now())))
	defer cancel()
	sent, start := m.now(), time.Now()
	n, err := sessionRenewScript.Run(rctx, m.client, []string{m.nodeKey()}, s.epoch, m.state(), m.cfg.TTL.Milliseconds()).Int64()
	m.wrote(sent, err)
	m.met.renewDuration.Observe(float64(time.Since(start).Microseconds()) / 1000)
	switch {
	case err != nil:
		m.noteRenewal(err)
		m.followTopology(err)
		return err
	case n == 1:
		m.noteRenewal(nil) // not when n is 0: a session found gone was not renewed
		m.mu.Lock()
		if m.sess.Load() == s {
			m.okAt.Store(&sent)
		}
		m.mu.Unlock()
		m.met.renewed.Inc()
		m.listSession(rctx, s.epoch) // if its start could not, or the entry is due again
		return nil
	}
	m.loseSession(s.epoch, lostError("the session ended in Redis"))
	return m.restart(ctx)
}

// restart starts a new session after one was lost, in one call (the
// renewer tries again next tick); its error says the old one was lost.
func (m *Manager) restart(ctx context.Context) error {
	err := m.startSession(ctx)
	switch {
	case err == nil: // startSession logged it, or whoever started it meanwhile did
	case ctx.Err() == nil && !errors.Is(err, ErrNotRunning): // not running: Stop came, nothing failed
		m.followTopology(err)
		m.met.heartbeatErrors.Inc() // before the check below: TestAFailedStartIsNotKeptOnceAnotherStarted starts a session here
		m.startMu.Lock()            // an Acquire's start may have made a session current since this one failed
		first := m.sess.Load() == nil && m.startErr.Swap(&err) == nil
		m.startMu.Unlock()
		if first { // an outage is one line, not one per tick
			m.cfg.Logger.Warn("lease session not started again yet; retried every tick", "node_id", m.cfg.Node,
				"redis_addr", m.sessionAddr(), "error", err.Error())
		}
	}
	return errors.Join(errSessionLost, err)
}

// lostCause is why a lease of epoch, not held, is lost: its session
// ended, or is overdue.
func (m *Manager) lostCause(epoch int64) error {
	if s := m.sess.Load(); s == nil || s.epoch != epoch {
		return lostError("its session ended")
	}
	since := m.now().Sub(*m.okAt.Load())
	return lostError(fmt.Sprintf("no session renewal confirmed for %s (limit %s, TTL·2/3)",
		since.Truncate(time.Millisecond), m.lostAfter.Truncate(time.Millisecond)))
}

// state is the session's "state" field: active, or draining after the gate.
func (m *Manager) state() string {
	if m.draining() {
		return stateDraining
	}
	return stateActive
}

// noteRenewal counts a failed session renewal and logs changes only.
func (m *Manager) noteRenewal(err error) {
	if err != nil {
		m.met.heartbeatErrors.Inc()
	}
	was := m.hbFailed.Swap(err != nil)
	switch {
	case err != nil && !was:
		m.cfg.Logger.Warn("lease session renewal failed; its rooms are lost if none succeeds in time", "node_id", m.cfg.Node,
			"redis_addr", m.sessionAddr(), "deadline_in", time.Until(m.deadline()).Round(time.Millisecond).String(), "error", err.Error())
	case err == nil && was:
		m.cfg.Logger.Info("lease session renewed again", "node_id", m.cfg.Node)
	}
}
