package lease

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// flight is one acquisition of a room, shared by every Acquire of the room
// meanwhile. A lease nobody waits for is released, never registered: it
// would keep its room owned and unserved. singleflight is not used: it
// cannot tell when every caller has left, which decides that.
type flight struct {
	done  chan struct{} // closed once lease and err are final and any release is done
	lease *Lease
	err   error
	ctx   context.Context // the first caller's values and deadline, not its cancellation
	end   time.Time       // the first caller's deadline, or a TTL after it came (not ctx's: retry bounds it)
	stop  context.CancelFunc
	// lastErr is the last attempt's error, nil after one succeeded: what a
	// caller that gives up was waiting out. Atomic: no lock per attempt.
	lastErr atomic.Pointer[error]

	// Under Manager.mu:
	waiters int  // callers still waiting
	decided bool // the result is fixed: a caller that gives up now still gets it…
	failed  bool // …unless it is an error: nothing is lost by leaving its clean-up
}

// attach returns the lease held for id, or makes the caller a waiter of
// id's flight, starting one if none. First it waits out what still
// settles the room: a lease ending (its holder must stop before the room
// gets a new fence; one whose session ended or is overdue is ended here,
// and the flight's currentSession loses an overdue session as a whole)
// or a decided flight (it may still be deleting this holder's values).
// A caller whose ctx never ends cannot leave: its flight runs on its goroutine.
func (m *Manager) attach(ctx context.Context, end time.Time, id string) (*Lease, *flight, error) {
	m.mu.Lock()
	for {
		l, f := m.leases[id], m.flights[id]
		switch {
		case !m.running:
			m.mu.Unlock()
			if m.draining() { // stopped by the drain's Release hook
				return nil, nil, fmt.Errorf("lease: acquire %s: %w", m.routeKey(id), ErrDraining)
			}
			return nil, nil, fmt.Errorf("lease: acquire %s: %w", m.routeKey(id), ErrNotRunning)
		case l != nil && l.held() && l.state.Load() == stateHandingOff:
			m.mu.Unlock()
			return nil, nil, fmt.Errorf("lease: acquire %s: the drain's hand-off has it: %w", m.routeKey(id), ErrDraining)
		case l != nil && l.held():
			m.mu.Unlock()
			return l, nil, nil
		case l != nil && !l.ended(): // its session ended or is overdue: its holder is told now
			m.mu.Unlock()
			l.end(m.lostCause(l.epoch)) // leaves the set on return, unless another end came first
			m.mu.Lock()
			continue
		case l == nil && (f == nil || !f.decided):
			if m.draining() { // no acquisition after the flip
				m.mu.Unlock()
				return nil, nil, errGateClosed
			}
			if err := ctx.Err(); err != nil {
				m.mu.Unlock()
				return nil, nil, fmt.Errorf("lease: acquire %s: %w", m.routeKey(id), err)
			}
			started := f == nil
			if started {
				f = &flight{done: make(chan struct{}), end: end, ctx: context.WithoutCancel(ctx), stop: func() {}}
				if _, ok := ctx.Deadline(); ok { // the attempts last as long as the caller waits
					f.ctx, f.stop = context.WithDeadline(f.ctx, end)
				} // without one, retry's TTL: no timer on the hot path
				m.flights[id] = f
			}
			f.waiters++
			m.mu.Unlock()
			switch {
			case !started:
			case ctx.Done() == nil:
				m.run(id, f)
			default:
				go m.run(id, f)
			}
			return nil, f, nil
		}
		settled, stopping := m.settledLocked(), m.stopReq
		m.mu.Unlock()
		select {
		case <-settled:
		case <-stopping: // the loop returns ErrNotRunning (ErrDraining after the Release hook)
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("lease: acquire %s: waiting for the room's last lease or acquisition to end: %w", m.routeKey(id), ctx.Err())
		}
		m.mu.Lock()
	}
}

// leave takes a caller that gave up off f and reports whether it left:
// not once f decided on a lease, which is then this caller's. The last to
// leave wakes a flight waiting for a session, which then stops.
func (m *Manager) leave(f *flight) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f.decided && !f.failed {
		return false
	}
	if f.waiters--; f.waiters == 0 {
		m.wakeSettled()
	}
	return true
}

// unwanted, under mu, returns why f's acquisition must stop (deciding f), or nil.
func (m *Manager) unwanted(f *flight) error {
	var err error
	switch {
	case m.draining():
		err = ErrDraining
	case !m.running:
		err = ErrNotRunning
	case f.waiters == 0:
		err = errNobodyWaits
	default:
		return nil
	}
	f.decided, f.failed = true, true
	return err
}

// run runs the acquisition for f and settles its result.
func (m *Manager) run(id string, f *flight) {
	defer func() {
		f.stop()
		m.mu.Lock()
		if m.flights[id] == f { // a waiting attach must not find f again, even after a panic
			delete(m.flights, id)
			m.wakeSettled()
		}
		m.mu.Unlock()
		close(f.done)
	}()
	take := func() (*Lease, error) {
		l, err := m.acquire(id, f)
		if err != nil {
			return nil, err
		}
		return m.register(l, f)
	}
	l, err := take()
	m.mu.Lock()
	again := errors.Is(err, ErrLost) && f.waiters > 0 // undecided: every caller may still leave
	m.mu.Unlock()
	if again {
		// The session was lost during the acquisition, which cleaned up after
		// itself: once more under the next session, as the caller would have
		// to (currentSession waits at most a TTL for it; a caller may leave).
		l, err = take()
	}
	m.mu.Lock()
	f.lease, f.err, f.decided = l, err, true
	m.mu.Unlock()
}

// register adds a new lease, or releases it if unwanted. The gate and the
// session are read under the snapshot's lock: no lease outlives the flip
// unseen by the drain, nor its session unseen by loseSession.
func (m *Manager) register(l *Lease, f *flight) (*Lease, error) {
	m.mu.Lock()
	err := m.unwanted(f)
	if err == nil && !m.alive(l.epoch, m.now()) { // lost or overdue: never handed out
		err = fmt.Errorf("lease: acquire %s: %w", l.key, lostError("its session ended while it was acquired"))
	}
	if err == nil || !errors.Is(err, ErrLost) {
		f.decided = true // whatever follows, this is the result
	} // lost: tried again under the next session (run), which callers may leave meanwhile
	if err != nil && !errors.Is(err, ErrLost) {
		err = fmt.Errorf("lease: acquire %s: %w", l.key, err)
	}
	if err != nil {
		m.mu.Unlock()
		if rerr := m.releaseUnknown(context.WithoutCancel(f.ctx), l.ID(), l.epoch, l.value); rerr != nil {
			return nil, errors.Join(err, rerr) // the route dies with the session
		}
		return nil, err
	}
	m.leases[l.ID()] = l // attach starts a flight only for a room with no lease: none is replaced
	m.met.held.Set(float64(len(m.leases)))
	m.mu.Unlock()
	m.met.acquired.Inc()
	return l, nil
}

// waitFlights waits, within ctx, for the acquisitions in progress; run it once stopped.
func (m *Manager) waitFlights(ctx context.Context) error {
	m.mu.Lock()
	fs := make([]*flight, 0, len(m.flights))
	for _, f := range m.flights {
		fs = append(fs, f)
	}
	m.mu.Unlock()
	for _, f := range fs {
		select {
		case <-f.done:
		case <-ctx.Done():
			return fmt.Errorf("lease: waiting for acquisitions in progress: %w", context.Cause(ctx))
		}
	}
	return nil
}
