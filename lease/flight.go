package lease

import (
	"context"
	"errors"
	"fmt"
)

// flight is one acquisition of a room in progress, shared by every
// Acquire call for that room that arrives meanwhile. Its script call runs
// detached from the callers: one caller giving up must not fail the
// others. A lease that nobody waits for any more when the script returns
// is released, never registered: a lease nobody holds would keep its room
// owned, renewed and unserved.
//
// golang.org/x/sync/singleflight is not used: it cannot tell when every
// caller has left (its Forget only stops new callers from joining), and
// that moment decides whether the lease is registered or released.
//
// A caller leaving does not cancel the flight: a caller that joins while
// the attempt is under way takes the flight over with its own ctx. Before
// each retry the flight checks that someone still waits (goOn).
type flight struct {
	done  chan struct{} // closed once lease and err are final and any release is done
	lease *Lease
	err   error
	// ctx ends when the manager stops: no further attempt is made then
	// (the one under way still finishes, so a lease it gets can be
	// released rather than left to expire).
	ctx    context.Context
	cancel context.CancelFunc

	// Under Manager.mu:
	waiters int  // callers still waiting
	decided bool // the result is fixed: a caller that gives up now still gets it
}

// join returns the flight for id, starting one if there is none, and
// counts the caller as its waiter. A flight that is already decided (its
// result is not this caller's) but not done is waited for first, within
// ctx and until Stop: it may still be releasing a lease it took unseen
// (releaseUnknown deletes any value of this Manager on the key, whatever
// its fence), and a flight started beside it would have its lease's key
// deleted under it. One acquisition per room at a time, clean-up included.
//
// A flight runs on a goroutine of its own, so that a caller whose ctx ends
// can leave while the script call goes on. A caller whose ctx can never
// end (ctx.Done() is nil) would never leave: a flight it starts runs on
// the caller's goroutine, before join returns, which spares the hand-over
// between two goroutines (a new goroutine, the wake-up of an idle thread
// to run it, a channel to wait on) that is otherwise a large share of an
// acquisition's latency. Callers joining meanwhile wait for it as for any
// flight.
func (m *Manager) join(ctx context.Context, id string) (*flight, error) {
	var f *flight
	m.mu.Lock()
	for {
		if !m.running {
			m.mu.Unlock()
			return nil, ErrNotRunning
		}
		f = m.flights[id]
		if f == nil || !f.decided {
			break
		}
		stopping := m.stopReq
		m.mu.Unlock()
		select {
		case <-f.done:
		case <-stopping: // the loop returns ErrNotRunning (or ErrDraining from the Release hook)
		case <-ctx.Done():
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("lease: acquire %s: waiting for an earlier acquisition to finish: %w", m.routeKey(id), err)
		}
		if err := m.refuseAfterFlip(); err != nil { // the flip came while this caller waited
			return nil, err
		}
		m.mu.Lock()
	}
	started := f == nil
	if started {
		f = &flight{done: make(chan struct{})}
		f.ctx, f.cancel = context.WithCancel(context.WithoutCancel(ctx))
		m.flights[id] = f
		m.pending[f] = struct{}{}
	}
	f.waiters++
	m.mu.Unlock()
	switch {
	case !started:
	case ctx.Done() == nil:
		m.fly(id, f)
	default:
		go m.fly(id, f)
	}
	return f, nil
}

// leave stops counting the caller as f's waiter. It reports false if the
// result was already decided: the caller must take it (a lease handed to
// no one would be renewed for nobody).
func (m *Manager) leave(f *flight) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f.decided {
		return false
	}
	f.waiters--
	return true
}

// errNobodyWaits ends an acquisition every caller gave up on.
var errNobodyWaits = errors.New("every caller gave up")

// goOn returns the check made before each retry of f's acquisition: none
// starts once the gate closed (no acquire script is sent
// after the flip), the manager stopped or nobody waits. A flight that
// stops for want of waiters is decided there and then, under mu, so a
// caller that arrives later does not take this error: it waits for this
// flight to finish (its clean-up included) and starts one of its own.
func (m *Manager) goOn(f *flight) func() error {
	return func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		switch {
		case m.gateClosed():
			return ErrDraining
		case !m.running:
			return ErrNotRunning
		case f.waiters == 0:
			f.decided = true
			return errNobodyWaits
		}
		return nil
	}
}

// fly runs the acquisition for f and settles its result.
func (m *Manager) fly(id string, f *flight) {
	defer func() {
		m.mu.Lock()
		delete(m.pending, f)
		if m.flights[id] == f { // decide's, unless a panic skipped it: a waiting join must not find f again
			delete(m.flights, id)
		}
		m.mu.Unlock()
		f.cancel()
		close(f.done)
	}()
	l, err := m.local(f.ctx, id) // a flight that just ended may have registered it
	if l == nil && err == nil {
		if l, err = m.acquire(f.ctx, id, m.goOn(f)); err == nil {
			l, err = m.register(context.WithoutCancel(f.ctx), l, f)
		}
	}
	m.decide(id, f, l, err)
}

// decide fixes f's result, if register has not already, and lets new
// callers start a new flight.
func (m *Manager) decide(id string, f *flight, l *Lease, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f.lease, f.err, f.decided = l, err, true
	if m.flights[id] == f {
		delete(m.flights, id)
	}
}

// register adds a freshly acquired lease, unless the gate closed while the
// script ran (ErrDraining), the manager stopped (ErrNotRunning) or every
// caller gave up: then the lease is released (discard: no OnEnd for a
// lease no caller saw), so no lease outlives the flip unseen by the drain,
// and none is renewed for nobody.
func (m *Manager) register(ctx context.Context, l *Lease, f *flight) (*Lease, error) {
	m.mu.Lock()
	var err error
	switch {
	case m.gateClosed():
		err = ErrDraining
	case !m.running:
		err = ErrNotRunning
	case f.waiters == 0:
		err = fmt.Errorf("lease: acquire %s: %w", l.key, errNobodyWaits)
	}
	if err != nil {
		f.decided = true
		m.mu.Unlock()
		if rerr := l.discard(ctx); rerr != nil {
			return nil, errors.Join(err, rerr) // the key expires within TTL
		}
		return nil, err
	}
	if old := m.leases[l.ID()]; old != nil && old != l {
		// Never expected (flights are one per room and local ends an
		// overdue lease first), but a replaced lease must not live on.
		defer old.end(m.overdueError(old, m.now()), true)
	}
	m.leases[l.ID()] = l
	m.met.held.Set(float64(len(m.leases)))
	f.decided = true
	m.mu.Unlock()
	m.met.acquired.Inc()
	return l, nil
}

// waitFlights waits, bounded by ctx, for every acquisition in progress to
// settle. Call it once running is false: no new flight starts then, and
// those still running release what they acquire.
func (m *Manager) waitFlights(ctx context.Context) error {
	m.mu.Lock()
	fs := make([]*flight, 0, len(m.pending))
	for f := range m.pending {
		f.cancel() // no further attempts: nothing would renew the lease
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
