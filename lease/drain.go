package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/drainkit/drainkit/drain"
)

// BeginDrain closes the drain gate: Acquire of a room not held returns
// [ErrDraining] (one matching [ErrHeld] if another node holds it), an
// acquisition in progress stops (one that raced the gate is released) and
// the renewer marks the node's session draining at once. Call it at the
// flip, as fxlease does; the lease hooks call it too. It may be called
// again, and before Start.
func (m *Manager) BeginDrain() {
	// No lock: register reads the gate under mu (see its doc).
	m.gateOnce.Do(func() { close(m.gate) })
}

func (m *Manager) draining() bool {
	select {
	case <-m.gate:
		return true
	default:
		return false
	}
}

// HandOff returns a drain hook (phase [drain.Flush]) that calls fn for
// every held lease, at most concurrency (at least 1) at a time, and
// releases each lease once its fn returned nil, so its room moves at once. A lease whose fn
// failed or came after the deadline ends with [ErrLeftToExpire]: its room
// stays owned until the session ends (the Release hook), as does that of
// a flushed lease whose release failed (Redis unreachable); the hook's
// error counts both. fn's context ends with the hook's or the lease's,
// and fn must then return: the hook waits for every fn. See docs/leases.md.
func (m *Manager) HandOff(fn func(ctx context.Context, l *Lease) error, concurrency int) (drain.Hook, error) {
	if fn == nil {
		return drain.Hook{}, errors.New("lease: HandOff: fn is nil")
	}
	m.handOff.Store(true)
	return drain.Hook{
		Name:  m.hookName("lease-handoff"),
		Phase: drain.Flush,
		Run: func(ctx context.Context) error {
			m.BeginDrain() // in case the flip did not reach us
			return m.runHandOff(ctx, fn, concurrency)
		},
	}, nil
}

// runHandOff is the hand-off hook's work; leases are renewed meanwhile.
func (m *Manager) runHandOff(ctx context.Context, fn func(ctx context.Context, l *Lease) error, concurrency int) error {
	var (
		mu             sync.Mutex
		released, lost int
		left           leftToExpire
	)
	settle := func(l *Lease, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			released++
		case errors.Is(err, ErrNotHeld), errors.Is(err, ErrLost):
			lost++
		default:
			left.add(l.ID(), err)
		}
	}
	// Take every lease before any fn runs (g.Go blocks at the limit): one
	// still held when this hook is abandoned would look releasable to Stop.
	var mine []*Lease
	for _, l := range m.snapshot() {
		if l.state.CompareAndSwap(stateHeld, stateHandingOff) { // false: lost or released since the snapshot
			mine = append(mine, l)
		}
	}
	flushed := make(chan *Lease, len(mine))
	var releaser sync.WaitGroup
	releaser.Go(func() {
		// A flushed room may move even if the drain's deadline is near.
		m.releaseFlushed(context.WithoutCancel(ctx), flushed, func(l *Lease, err error) {
			switch {
			case err == nil, errors.Is(err, ErrLeftToExpire), errors.Is(err, ErrLost), errors.Is(err, ErrNotHeld):
				// Counted by the release, by whoever ended the lease, or lost.
			default: // the session's end frees the room: left to expire, which Stop no longer sees
				m.met.leftToExpire.Inc()
				err = fmt.Errorf("release: %w", err)
			}
			settle(l, err)
		})
	})
	var g errgroup.Group
	g.SetLimit(max(concurrency, 1))
	for _, l := range mine {
		g.Go(func() error {
			if err := m.flushOne(ctx, l, fn); err != nil {
				settle(l, err)
			} else {
				flushed <- l
			}
			return nil
		})
	}
	// A drain report whose stack stops here: a fn did not return when its
	// context ended, and the hook was abandoned waiting for it.
	_ = g.Wait()
	close(flushed)
	releaser.Wait()
	// Rooms lost after the flip that the hand-off never had were not handed
	// off either: counted, or a drain that lost its session first reads clean.
	lost += int(m.lostDraining.Load())
	m.cfg.Logger.Info("lease hand-off done", "node_id", m.cfg.Node,
		"released", released, "left_to_expire", left.n, "lost", lost)
	if left.n == 0 {
		return nil
	}
	return fmt.Errorf("lease: hand-off: %d released, %d left to expire, %d lost: %w", released, left.n, lost, left.err())
}

// leftToExpire groups the rooms a hand-off left to expire by cause: a
// drain that lost a primary says the cause once, with its rooms, not once
// per room in a line that a log shipper would cut.
type leftToExpire struct {
	n      int
	causes []error             // one per text, in the order first seen
	rooms  map[string][]string // by cause text
}

const maxRoomsNamed = 10 // per cause

func (e *leftToExpire) add(room string, err error) {
	if e.n++; e.rooms == nil {
		e.rooms = map[string][]string{}
	}
	if e.rooms[err.Error()] == nil {
		e.causes = append(e.causes, err)
	}
	e.rooms[err.Error()] = append(e.rooms[err.Error()], room)
}

// err joins one error per cause, naming its rooms (at most maxRoomsNamed).
func (e *leftToExpire) err() error {
	errs := make([]error, len(e.causes))
	for i, cause := range e.causes {
		rooms := e.rooms[cause.Error()]
		slices.Sort(rooms)
		named := "room " + rooms[0]
		if len(rooms) > 1 {
			named = "rooms " + strings.Join(rooms[:min(len(rooms), maxRoomsNamed)], ", ")
		}
		if more := len(rooms) - maxRoomsNamed; more > 0 {
			named += fmt.Sprintf(" and %d more", more)
		}
		errs[i] = fmt.Errorf("%s: %w", named, cause)
	}
	return errors.Join(errs...)
}

// flushOne runs fn for l and returns nil if l may be released (still held);
// otherwise l is left to expire, unless lost, and the error says why.
func (m *Manager) flushOne(ctx context.Context, l *Lease, fn func(context.Context, *Lease) error) error {
	err := context.Cause(ctx)
	lctx := l.Context()
	if err == nil {
		fctx, cancel := context.WithCancelCause(ctx)
		stop := context.AfterFunc(lctx, func() { cancel(context.Cause(lctx)) })
		err = fn(fctx, l)
		stop()
		cancel(nil)
	}
	if err == nil && !l.held() { // lost while fn ran: the room may have moved
		l.end(m.lostCause(l.epoch)) // overdue, not yet lost: its holder is told now, as by attach
		err = cmp.Or(context.Cause(lctx), ErrLost)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrLost), errors.Is(context.Cause(lctx), ErrLost):
		return ErrLost
	}
	m.leaveToExpire(l)
	return err
}

// ReleaseHook returns a drain hook (phase [drain.Release]) that calls
// [Manager.BeginDrain], then [Manager.Stop]: the session ends, and with it
// every lease still held, in one command. A drain cut short (a second
// signal, or its deadline) skips the phase, and the hook's Abort stops the
// Manager instead, so the rooms are free at once, not at the session's
// expiry: it waits at most CallTimeout for that Stop, which goes on in the
// background if it takes longer (OnEnd hooks, a hung Redis).
func (m *Manager) ReleaseHook() drain.Hook {
	return drain.Hook{Name: m.hookName("lease-release"), Phase: drain.Release, Run: func(ctx context.Context) error {
		m.BeginDrain() // in case the flip did not reach us
		return m.Stop(ctx)
	}, Abort: m.abortRelease}
}

// abortRelease is the Release hook's Abort. It starts one Stop, with a
// CallTimeout (its session's end gets one more: Stop's own rule), and
// waits for it at most a CallTimeout: an Abort must return promptly, and
// Stop also waits for the lease hooks and for a Stop the deadline cut off.
// Abort returns no error: one is logged, as the rooms then wait for the
// session's expiry.
func (m *Manager) abortRelease() {
	m.mu.Lock()
	if m.aborted == nil {
		done := make(chan struct{})
		m.aborted = done
		go func() {
			defer close(done)
			ctx, cancel := context.WithTimeout(context.Background(), m.cfg.CallTimeout)
			defer cancel()
			if err := m.Stop(ctx); err != nil {
				m.cfg.Logger.Warn("lease manager stopped at the drain's cut-off with errors", "node_id", m.cfg.Node, "error", err.Error())
			}
		}()
	}
	done := m.aborted
	m.mu.Unlock()
	wait := time.NewTimer(m.cfg.CallTimeout)
	defer wait.Stop()
	select {
	case <-done:
	case <-wait.C:
		m.cfg.Logger.Warn("lease manager still stopping after the drain's cut-off; it goes on while the process lives", "node_id", m.cfg.Node)
	}
}

// hookName is kind(RoutePrefix): a drain refuses a name used twice.
func (m *Manager) hookName(kind string) string {
	return kind + "(" + m.cfg.RoutePrefix + ")"
}
