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

// Tracker counts in-flight work (HTTP requests, RPCs, batches) and notices
// arrivals. After CloseIntake, Begin refuses new work. Wait returns the
// moment the count reaches zero: waiters are notified, nothing polls.
//
// The zero value is not usable; use NewTracker.
type Tracker struct {
	state   atomic.Int64 // in-flight count | closedBit
	waiters atomic.Int32
	_       [56]byte     // keep last off state's cache line: cores would bounce it on every request
	last    atomic.Int64 // milliseconds since epoch of the last arrival, +1; 0 = none yet
	epoch   time.Time

	mu   sync.Mutex
	idle chan struct{} // closed when the count reaches zero; nil when nobody waits

	// streams ends the untracked streams (health Watch) when intake
	// closes; see Tracker.StreamServerInterceptor.
	streams    context.Context
	endStreams context.CancelFunc
}

// NewTracker returns a Tracker with intake open.
func NewTracker() *Tracker {
	t := &Tracker{epoch: time.Now()}
	t.streams, t.endStreams = context.WithCancel(context.Background())
	return t
}

// holdStream returns a context for an untracked stream that also ends when
// intake closes, and the function that releases it when the stream ends.
func (t *Tracker) holdStream(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	if t.streams.Err() != nil { // intake already closed: AfterFunc would cancel only later, on its own goroutine
		cancel()
		return ctx, cancel
	}
	stop := context.AfterFunc(t.streams, cancel)
	return ctx, func() { stop(); cancel() }
}

// Begin records the arrival of one piece of work. It returns false, and
// records nothing, once intake is closed; otherwise End must follow.
func (t *Tracker) Begin() bool {
	// Millisecond resolution is all the adaptive delay needs, and it lets
	// most requests only read the shared word instead of writing it.
	if ms := int64(time.Since(t.epoch)/time.Millisecond) + 1; t.last.Load() != ms { // +1: never 0, "none yet"
		t.last.Store(ms)
	}
	if t.state.Add(1)&closedBit != 0 {
		t.End()
		return false
	}
	return true
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

// CloseIntake makes every later Begin fail. Work already begun goes on;
// untracked gRPC streams (health Watch) are ended.
func (t *Tracker) CloseIntake() {
	for {
		v := t.state.Load()
		if v&closedBit != 0 || t.state.CompareAndSwap(v, v|closedBit) {
			break
		}
	}
	t.endStreams()
}

// IntakeClosed reports whether CloseIntake was called.
func (t *Tracker) IntakeClosed() bool { return t.state.Load()&closedBit != 0 }

// InFlight returns the number of pieces of work begun and not yet ended.
func (t *Tracker) InFlight() int { return int(t.state.Load() &^ closedBit) }

// LastArrival returns when Begin was last called (to the millisecond,
// rounded down), or the zero time if never.
func (t *Tracker) LastArrival() time.Time {
	n := t.last.Load()
	if n == 0 {
		return time.Time{}
	}
	return t.epoch.Add(time.Duration(n-1) * time.Millisecond)
}

// Wait blocks until no work is in flight or ctx is done, and returns
// ctx.Err() in the latter case. It does not close intake: call CloseIntake
// first, or new work may keep the count above zero.
func (t *Tracker) Wait(ctx context.Context) error {
	// Register as a waiter before reading the count: End decrements before it
	// reads waiters, so one of the two always sees the other.
	t.waiters.Add(1)
	defer t.waiters.Add(-1)
	t.mu.Lock()
	if t.InFlight() == 0 {
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
