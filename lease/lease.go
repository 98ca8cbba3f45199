package lease

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
)

// Lease states: held → handingOff → handedOff, or held → ended; the ended ones last (see ended).
const (
	stateHeld int32 = iota
	stateHandingOff
	stateEnded
	stateHandedOff // ended while the drain's hand-off had it
)

// Lease is one room held by this process; it is safe for concurrent use.
type Lease struct {
	m     *Manager
	key   string // route key; the id is its hash tag
	value string // node|epoch|fence, as stored in Redis
	fence int64
	epoch int64 // the session it hangs off: held while that session lives
	state atomic.Int32

	// Made on first use, or a lease exceeds BENCHMARKS.md's heap target.
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelCauseFunc
	cause  error // how the lease ended; nil while it has not
}

func (m *Manager) newLease(id string, fence int64, s *session) *Lease {
	return &Lease{m: m, key: m.routeKey(id), value: s.prefix + strconv.FormatInt(fence, 10), fence: fence, epoch: s.epoch}
}

// ID returns the room id.
func (l *Lease) ID() string {
	return l.key[len(l.m.cfg.RoutePrefix)+1 : len(l.key)-1]
}

// Token returns the fencing token, greater than that of any earlier
// acquisition of the room by anyone: pass it with every write, so storage
// refuses a stale owner.
func (l *Lease) Token() int64 { return l.fence }

// Context returns a context cancelled when the lease ends; context.Cause
// says how: [ErrLost] (wrapped with the reason), [ErrLeftToExpire] or
// [ErrReleased]. Work as the room's owner under it.
func (l *Lease) Context() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		l.ctx, l.cancel = context.WithCancelCause(context.Background())
		if l.cause != nil {
			l.cancel(l.cause)
		}
	}
	return l.ctx
}

// held reports whether l has not ended and its session is alive.
func (l *Lease) held() bool {
	return !l.ended() && l.m.alive(l.epoch, l.m.now())
}

// end ends the lease once and reports whether this call did; a cause
// other than ErrReleased (the holder did not choose it) runs OnLost. The
// lease leaves the set after its hooks: the room gets no new lease before
// its holder is told.
func (l *Lease) end(cause error) bool {
	if !l.claim() {
		return false
	}
	l.finish(cause)
	return true
}

// claim moves the lease to its ended state and reports whether this call did.
func (l *Lease) claim() bool {
	// No state goes back to held or handingOff: a failed swap means ended.
	return l.state.CompareAndSwap(stateHeld, stateEnded) || l.state.CompareAndSwap(stateHandingOff, stateHandedOff)
}

// ended reports whether the lease has ended, its hooks run or not.
func (l *Lease) ended() bool { return l.state.Load() >= stateEnded }

// finish does the rest of an end: count, cause, context, hooks; then l
// leaves the set. Counted before the context ends, so that whoever sees it
// end (the hand-off reading lostDraining) sees the count.
func (l *Lease) finish(cause error) {
	defer l.m.forget(l)
	l.count(cause)
	l.cancelWith(cause)
	l.runHooks(cause)
}

// count counts a lost lease (left to expire is counted by the drain).
func (l *Lease) count(cause error) {
	if errors.Is(cause, ErrLost) {
		l.m.met.lost.Inc()
		if l.m.draining() && l.state.Load() != stateHandedOff { // the hand-off counts its own
			l.m.lostDraining.Add(1)
		}
	}
}

// endedCause waits until whoever ended l has set its cause, and returns it.
func (l *Lease) endedCause() error {
	ctx := l.Context()
	<-ctx.Done()
	return context.Cause(ctx)
}

// cancelWith records how the lease ended and cancels its context.
func (l *Lease) cancelWith(cause error) {
	l.mu.Lock()
	l.cause = cause
	cancel := l.cancel
	l.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
}

// runHooks logs a lost lease and runs its hooks.
func (l *Lease) runHooks(cause error) {
	if !errors.Is(cause, ErrReleased) {
		if errors.Is(cause, ErrLost) {
			l.m.cfg.Logger.Warn("lease lost", "node_id", l.m.cfg.Node, "epoch", l.epoch, "room", l.ID(), "fence", l.fence, "cause", cause.Error())
		}
		l.callHook("OnLost", l.m.cfg.OnLost, cause)
	}
	l.callHook("OnEnd", l.m.cfg.OnEnd, cause)
}

// callHook calls hook, recovering a panic: on the renewer it would crash
// the process or cut short the end of other leases.
func (l *Lease) callHook(name string, hook func(*Lease, error), cause error) {
	if hook == nil {
		return
	}
	defer func() {
		if v := recover(); v != nil {
			l.m.cfg.Logger.Error("lease hook panicked", "hook", name, "room", l.ID(), "fence", l.fence,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
	}()
	hook(l, cause)
}

func (l *Lease) label() string { return fmt.Sprintf("%s@%d", l.key, l.fence) }
