package drain

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// closedBit marks intake as closed in Tracker.state; the low bits count
// in-flight work. One word keeps Begin to a single atomic add.
const closedBit = int64(1) << 62

// Tracker counts in-flight work (HTTP requests, RPCs, batches) and notes
// arrivals. After CloseIntake, Begin refuses new work. Wait returns the
// moment the count reaches zero: waiters are notified, nothing polls. The
// zero value is a Tracker with intake open; it must not be copied after
// first use.
type Tracker struct {
	state   atomic.Int64  // in-flight count | closedBit
	arrived atomic.Uint64 // Begin calls; beside state, whose cache line every Begin writes anyway
	refused atomic.Uint64 // Begin calls after CloseIntake
	waiters atomic.Int32
	_       [56]byte // keep lastArrivalMS off state's cache line: cores would bounce it on every request

	lastArrivalMS atomic.Int64 // since epoch, +1; 0 = none yet
	// epoch is the first arrival, set by it so that the zero Tracker needs
	// no constructor; a time.Time, whose monotonic reading no wall-clock
	// step moves.
	epoch atomic.Pointer[time.Time]

	mu     sync.Mutex
	idle   chan struct{} // closed when the count reaches zero; nil when nobody waits
	closed chan struct{} // closed by CloseIntake; made by whichever of it and IntakeClosed comes first
}

// Begin records the arrival of one piece of work. It returns false once
// intake is closed (the arrival is counted, as refused, and nothing is in
// flight); otherwise End must follow.
func (t *Tracker) Begin() bool { return t.begin(true) }

// BeginForwarded is [Tracker.Begin] for work another instance forwarded
// here (marked with [ForwardedHeader]): tracked and refused alike, but no
// arrival, so [Tracker.Arrivals] sees only what the load balancers send.
func (t *Tracker) BeginForwarded() bool { return t.begin(false) }

// begin is Begin when arrival is set, else BeginForwarded.
func (t *Tracker) begin(arrival bool) bool {
	if arrival {
		// Millisecond resolution is all the adaptive delay needs, and it lets
		// most requests only read the shared word instead of writing it.
		if ms := int64(time.Since(*t.firstArrival())/time.Millisecond) + 1; t.lastArrivalMS.Load() != ms { // +1: never 0, "none yet"
			t.lastArrivalMS.Store(ms)
		}
		t.arrived.Add(1)
	}
	if t.state.Add(1)&closedBit != 0 {
		if arrival {
			t.refused.Add(1)
		}
		t.End()
		return false
	}
	return true
}

// Arrivals returns how many times Begin was called, how many of those
// calls were refused because intake was closed, and when Begin was last
// called (to the millisecond, rounded down; the zero time if never; a
// refused Begin counts, since a client still sent it here;
// [Tracker.BeginForwarded] does not). Package
// lifecycle reads them at the flip and after the drain: work that kept
// arriving after the flip, and above all work refused after intake
// closed, says the propagation delay was shorter than the load balancers
// took to notice; its adaptive delay waits for the last arrival to age.
func (t *Tracker) Arrivals() (arrived, refused uint64, last time.Time) {
	arrived, refused = t.arrived.Load(), t.refused.Load()
	if n := t.lastArrivalMS.Load(); n != 0 { // after epoch was set: Begin sets epoch first
		last = t.epoch.Load().Add(time.Duration(n-1) * time.Millisecond)
	}
	return arrived, refused, last
}

// firstArrival returns epoch, setting it to now if this is the first arrival.
func (t *Tracker) firstArrival() *time.Time {
	if e := t.epoch.Load(); e != nil {
		return e
	}
	now := time.Now()
	if t.epoch.CompareAndSwap(nil, &now) {
		return &now
	}
	return t.epoch.Load()
}

// End records that one piece of work begun with Begin has finished.
func (t *Tracker) End() {
	if t.state.Add(-1)&^closedBit == 0 && t.waiters.Load() > 0 {
		t.mu.Lock()
		if t.idle != nil {
			close(t.idle)
			t.idle = nil
		}
		t.mu.Unlock()
	}
}

// CloseIntake makes every later Begin fail. Work already begun goes on.
func (t *Tracker) CloseIntake() {
	for {
		v := t.state.Load()
		if v&closedBit != 0 || t.state.CompareAndSwap(v, v|closedBit) {
			break
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed == nil {
		t.closed = make(chan struct{})
	}
	select {
	case <-t.closed: // an earlier CloseIntake, or IntakeClosed after the bit was set
	default:
		close(t.closed)
	}
}

// IntakeClosed returns a channel that is closed once CloseIntake has been
// called, whether it was asked for before or after. Work that is not
// counted because it lasts as long as its client (a health Watch stream)
// ends itself when it is closed.
func (t *Tracker) IntakeClosed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed == nil {
		t.closed = make(chan struct{})
		if t.state.Load()&closedBit != 0 { // CloseIntake set the bit and has yet to take the lock
			close(t.closed)
		}
	}
	return t.closed
}

// inFlight returns the number of pieces of work begun and not yet ended.
func (t *Tracker) inFlight() int { return int(t.state.Load() &^ closedBit) }

// Wait blocks until no work is in flight or ctx is done, and returns
// ctx.Err() in the latter case. It does not close intake: call CloseIntake
// first, or new work may keep the count above zero.
func (t *Tracker) Wait(ctx context.Context) error {
	// Register as a waiter before reading the count: End decrements before it
	// reads waiters, so one of the two always sees the other.
	t.waiters.Add(1)
	defer t.waiters.Add(-1)
	t.mu.Lock()
	if t.inFlight() == 0 {
		t.mu.Unlock()
		return nil
	}
	if t.idle == nil {
		t.idle = make(chan struct{})
	}
	idle := t.idle
	t.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
