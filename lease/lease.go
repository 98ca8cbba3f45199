package lease

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// Lease states. A lease moves held → handingOff → ended, or held → ended;
// ended is final.
const (
	stateHeld int32 = iota
	stateHandingOff
	stateEnded
)

// Lease is one room held by this process. Its fencing token ([Lease.Token])
// grows with every acquisition of the room, by anyone: pass it with every
// write the room's owner makes so storage can reject a stale owner.
//
// A Lease is safe for concurrent use.
type Lease struct {
	m      *Manager
	key    string // route key; the id is its hash tag
	value  string // node|holder|fence, as stored in Redis
	fence  int64
	sig    atomic.Pointer[signals] // made on first use; see signals
	lastOK atomic.Int64            // unix ns when the last confirmed renewal (or the acquire) was sent
	state  atomic.Int32
	slot   uint16      // Cluster hash slot of key, for batching (fills state's padding)
	taken  atomic.Bool // ended while the drain's hand-off had it (the struct stays in its 80-byte size class)
}

// signals are a lease's context. They are made when first asked for
// (Context), not with the lease: a node holds up to hundreds of thousands
// of leases, most of whose holders never ask, and a context costs about
// 100 bytes a lease. A lease that ends before anyone asked stores only
// how it ended (ctx nil, cause set), from which a context asked for later
// is made already cancelled: a Release of a lease nobody watched then
// makes nothing at all.
type signals struct {
	ctx    context.Context // nil: ended before anyone asked
	cancel context.CancelCauseFunc
	cause  error // how an unasked lease ended (ctx nil)
}

// releasedUnasked is the end of every lease released before anyone asked
// for its context, shared: the common end of a lease needs no allocation.
var releasedUnasked = &signals{cause: ErrReleased}

// signals returns l's signals, making them if nobody has yet. Callers
// racing here all get the one that was stored first. After an unasked
// end they are made cancelled with the end's cause.
func (l *Lease) signals() *signals {
	for {
		old := l.sig.Load()
		if old != nil && old.ctx != nil {
			return old
		}
		s := new(signals)
		s.ctx, s.cancel = context.WithCancelCause(context.Background())
		if old != nil {
			s.cancel(old.cause)
		}
		if l.sig.CompareAndSwap(old, s) {
			return s
		}
		s.cancel(nil) // another caller's, or the end's, was stored first
	}
}

// endSignals ends l's signals with cause: it cancels them if anyone made
// them, or records the end for signals made later. The end runs once.
func (l *Lease) endSignals(cause error) {
	var unasked *signals
	for {
		if s := l.sig.Load(); s != nil { // made (only the end stores an unasked one)
			s.cancel(cause)
			return
		}
		if unasked == nil {
			unasked = releasedUnasked
			if cause != ErrReleased {
				unasked = &signals{cause: cause}
			}
		}
		if l.sig.CompareAndSwap(nil, unasked) {
			return
		}
	}
}

func (m *Manager) newLease(id string, fence int64, value string, sent time.Time) *Lease {
	key := m.routeKey(id)
	l := &Lease{
		m:     m,
		key:   key,
		slot:  keySlot(key),
		value: value,
		fence: fence,
	}
	l.lastOK.Store(sent.UnixNano())
	return l
}

// ID returns the room id.
func (l *Lease) ID() string {
	return l.key[len(l.m.cfg.RoutePrefix)+1 : len(l.key)-1]
}

// Token returns the fencing token: strictly greater than the token of any
// earlier acquisition of this room.
func (l *Lease) Token() int64 { return l.fence }

// Context returns a context that is cancelled when the lease ends, and
// context.Cause says how:
//   - [ErrLost] (wrapped, with the reason): Redis reported the lease gone
//     or taken, or no renewal was confirmed for TTL·2/3, so it is given up
//     before Redis could expire it;
//   - [ErrLeftToExpire]: the drain left it to expire unreleased (its
//     hand-off failed, or the manager stopped holding it);
//   - [ErrReleased]: [Lease.Release] or the drain released it.
//
// Work done as the room's owner should run under it; a holder that did
// not end the lease itself tells a loss from its own release by the cause
// not being ErrReleased. While the context is not cancelled the lease is
// held, as far as this process can know: pass [Lease.Token] with every
// write so that storage rejects a stale owner in the window before the
// renewer notices a loss.
func (l *Lease) Context() context.Context { return l.signals().ctx }

// held reports whether the lease has not ended and its last confirmed
// renewal is recent enough (TTL·2/3) to trust: a renewer starved of CPU
// cannot make a lease look held after its TTL could have passed.
func (l *Lease) held() bool {
	return l.state.Load() != stateEnded && !l.overdue(l.m.now(), l.m.lostAfter)
}

// Release ends the lease and deletes it from Redis if it is still ours
// (compare-and-DEL). The context is cancelled before the key is deleted, so
// work under it stops before another node can take the room.
//
// Except for a lease the drain has (below), Release asks Redis at least
// once (that call gets CallTimeout, within ctx), even when the last
// confirmed renewal is more than a TTL old: renewals whose replies were
// lost may have kept the key alive.
// Failed calls are retried while ctx lasts, but no retry starts after the
// moment Redis would have expired the key by the confirmed renewals.
//
// From the moment the drain's hand-off ([Manager.HandOff]) takes a lease,
// the hand-off decides: it releases the lease once its room is flushed, or
// leaves it to expire. Release then touches nothing. It returns an error
// wrapping [ErrLeftToExpire] for a lease the drain or Stop left to expire
// (its room may not be flushed, and the next owner must wait for the key's
// TTL), and one wrapping [ErrDraining] for any other lease the hand-off
// took: still being flushed (it stays held, renewed and the hand-off's),
// released by the hand-off, or lost while the hand-off had it. So neither
// a holder's deferred Release nor one racing the drain undoes what the
// drain decided.
//
// Release returns nil if it deleted the key, an error wrapping [ErrNotHeld]
// if the key had expired or belongs to someone else (nothing to undo: do
// not fail a drain on it), or the Redis error. In every case but
// ErrDraining the lease has ended locally and is no longer renewed.
func (l *Lease) Release(ctx context.Context) error {
	if !l.endHeld(ErrReleased) {
		// Not held: in the hand-off, or ended (states only move forward).
		switch {
		case l.state.Load() == stateHandingOff:
			return fmt.Errorf("lease: release %s: the drain's hand-off has it: %w", l.label(), ErrDraining)
		case errors.Is(l.endCause(), ErrLeftToExpire):
			return fmt.Errorf("lease: release %s: %w", l.label(), ErrLeftToExpire)
		case l.taken.Load():
			return fmt.Errorf("lease: release %s: the drain's hand-off had it: %w", l.label(), ErrDraining)
		}
		// Released or lost before, by its holder or the renewer: the
		// compare-and-DEL below deletes the key only if it is still ours.
	}
	status, err := l.releaseKey(ctx)
	if err != nil {
		return fmt.Errorf("lease: release %s: %w", l.key, err)
	}
	return l.m.releaseResult(l, status)
}

// releaseKey compare-and-DELs the key (see Release for the retries) and
// returns the script's status: 1 deleted, 0 gone, -1 someone else's.
func (l *Lease) releaseKey(ctx context.Context) (int64, error) {
	expiry := l.deadline(l.m.cfg.TTL)
	pastExpiry := func() error {
		if l.m.now().Before(expiry) {
			return nil
		}
		return errPastExpiry
	}
	var status [1]int8
	err := l.m.retryIf(ctx, pastExpiry, func(ctx context.Context) error {
		return decodeStatuses(releaseScript.Run(ctx, l.m.client, []string{l.key}, l.value), status[:])
	})
	return int64(status[0]), err
}

// errPastExpiry ends a release's retries: by the confirmed renewals, Redis
// has expired the key by now.
var errPastExpiry = errors.New("past the key's expiry by the last confirmed renewal, no retry")

// discard gives up a lease that was never registered. No caller ever saw
// it, so neither OnEnd nor OnLost runs and no metric counts it. Its key is
// compare-and-DELed on a context the callers cannot cancel: those who
// cancelled the acquisition are the reason it is unwanted, and it must
// not keep its room for a whole TTL. The retries are Release's, within
// TTL. It returns only a Redis error: a key gone or taken is fine.
func (l *Lease) discard(ctx context.Context) error {
	l.state.Store(stateEnded)
	l.endSignals(ErrReleased)
	if _, err := l.releaseKey(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("lease: release unregistered %s: %w", l.label(), err)
	}
	return nil
}

// endCause returns how an ended lease ended. The goroutine that ended it
// records the cause just after marking it ended: an unasked end is read as
// it is, without making a context; otherwise the context, made here if the
// record is not there yet, is cancelled with the cause by that goroutine,
// so waiting for it never misses the record. Call it only once state is
// ended.
func (l *Lease) endCause() error {
	if s := l.sig.Load(); s != nil && s.ctx == nil {
		return s.cause
	}
	ctx := l.Context()
	<-ctx.Done()
	return context.Cause(ctx)
}

// begin moves a held lease into hand-off; false if it is not held.
func (l *Lease) beginHandOff() bool {
	return l.state.CompareAndSwap(stateHeld, stateHandingOff)
}

// end ends the lease once: its context is cancelled with cause, then (if
// lost: the holder did not choose to end it, so it must stop) OnLost runs,
// then OnEnd, and only then does the lease leave the manager's set. An
// Acquire of the room on this Manager that finds the ended lease still in
// the set waits for it to leave (see local), so no new lease of the room
// is handed out before the old holder was told to stop.
// It reports whether this call ended it.
func (l *Lease) end(cause error, lost bool) bool {
	for {
		s := l.state.Load()
		if s == stateEnded {
			return false
		}
		if s == stateHandingOff {
			l.taken.Store(true) // before the state says ended: Release reads them in that order
		}
		if l.state.CompareAndSwap(s, stateEnded) {
			break
		}
	}
	l.ended(cause, lost)
	return true
}

// endHeld is end for a lease that is held, not in a hand-off (whose
// outcome is the hand-off's) nor ended: it reports false otherwise.
func (l *Lease) endHeld(cause error) bool {
	if !l.state.CompareAndSwap(stateHeld, stateEnded) {
		return false
	}
	l.ended(cause, false)
	return true
}

// ended does the rest of an end, once the state says ended.
func (l *Lease) ended(cause error, lost bool) {
	defer l.m.forget(l)
	l.endSignals(cause)
	if lost {
		if errors.Is(cause, ErrLost) { // left to expire is counted by the drain
			l.m.met.lost.Inc()
			l.m.cfg.Logger.Warn("lease lost", "room", l.ID(), "fence", l.fence, "cause", cause.Error())
		}
		l.callHook("OnLost", l.m.cfg.OnLost, cause)
	}
	l.callHook("OnEnd", l.m.cfg.OnEnd, cause)
}

// callHook calls hook, if set, and recovers a panic in it, logging it
// with the room: hooks run on the Manager's goroutines (the renewer above
// all), where a panic would crash the process or cut short the end of
// this lease and of the others ended with it.
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

// overdue reports whether the last confirmed renewal was sent so long ago
// (TTL·2/3) that the holder must stop: Redis may expire the key TTL after
// that send, and the remaining third covers clock drift and a slow stop.
func (l *Lease) overdue(now time.Time, lostAfter time.Duration) bool {
	return now.UnixNano()-l.lastOK.Load() >= int64(lostAfter)
}

// deadline is when the lease becomes overdue.
func (l *Lease) deadline(lostAfter time.Duration) time.Time {
	return time.Unix(0, l.lastOK.Load()+int64(lostAfter))
}

// label returns the route key and fence, for errors and logs.
func (l *Lease) label() string { return fmt.Sprintf("%s@%d", l.key, l.fence) }
