package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/drainkit/drainkit/drain"
)

// handOffResult counts what a hand-off did with the leases it took.
type handOffResult struct {
	// Released leases: their function succeeded and the key was deleted.
	Released int
	// LeftToExpire leases: their function failed or the deadline came
	// first, so they were not released (an unflushed room is never
	// released); the next owner recovers it after the TTL with a higher
	// fence.
	LeftToExpire int
	// Lost leases: lost or already ended before or during their hand-off.
	Lost int
}

// handOffError reports leases a hand-off left to expire.
type handOffError struct {
	Result handOffResult
	// Err joins the per-lease errors.
	Err error
}

func (e *handOffError) Error() string {
	return fmt.Sprintf("lease: hand-off: %d released, %d left to expire, %d lost: %v",
		e.Result.Released, e.Result.LeftToExpire, e.Result.Lost, e.Err)
}

// Unwrap returns the per-lease errors.
func (e *handOffError) Unwrap() error { return e.Err }

// HandOff returns a drain hook (phase [drain.Flush]) that hands every held
// lease over, at most concurrency at a time (at least 1): it calls fn (say,
// flush the room's snapshot) and, as soon as fn returned nil, releases that
// lease, so rooms move one by one rather than after the slowest. Rooms
// whose fn returns while a release is in flight are released together in
// the next pipeline, so thousands of rooms cost a few round trips. A lease
// whose fn failed, or whose turn came after the deadline, is left to
// expire: its context is cancelled with [ErrLeftToExpire], it is no longer
// renewed, and its key stays until the TTL passes, so the next owner
// recovers with a higher fence. fn gets a context that ends with the
// hook's or when the lease is lost. From the moment the hook takes a
// lease, [Lease.Release] of that lease touches nothing: it returns
// [ErrLeftToExpire] once the hook left it to expire, [ErrDraining]
// otherwise. The hook's name is "lease-handoff(" +
// RoutePrefix + ")", e.g. "lease-handoff(room:route:)".
//
// It needs [Config].HandOff, which tells the Release hook, from the
// Manager's creation on, that rooms are flushed before they move; without
// it HandOff returns an error naming the field, before anything drains.
func (m *Manager) HandOff(fn func(ctx context.Context, l *Lease) error, concurrency int) (drain.Hook, error) {
	switch {
	case !m.cfg.HandOff:
		return drain.Hook{}, errors.New("lease: HandOff needs Config.HandOff=true: without it the Release hook releases rooms the hand-off did not flush")
	case fn == nil:
		return drain.Hook{}, errors.New("lease: HandOff: fn is nil")
	}
	return drain.Hook{
		Name:  m.hookName("lease-handoff"),
		Phase: drain.Flush,
		Run: func(ctx context.Context) error {
			m.BeginDrain() // in case the flip did not reach us: no lease may arrive now
			_, err := m.runHandOff(ctx, fn, concurrency)
			return err
		},
	}, nil
}

// runHandOff hands every held lease over, at most concurrency at a time
// (at least 1): it calls fn (e.g. flush the room's snapshot) and, as soon as
// fn returned nil, releases that lease, so rooms move one by one rather
// than after the slowest. A lease whose fn failed, or whose turn came after
// ctx ended, is left to expire: its context is cancelled with
// [ErrLeftToExpire], it is no longer renewed, and its key stays until the
// TTL passes. Leases keep being renewed while their fn runs.
//
// fn gets a context that ends with ctx or when the lease is lost. The
// returned error is a *handOffError when any lease was left to expire.
// It closes the gate first (BeginDrain), so no lease arrives during it.
func (m *Manager) runHandOff(ctx context.Context, fn func(ctx context.Context, l *Lease) error, concurrency int) (handOffResult, error) {
	var (
		mu   sync.Mutex
		res  handOffResult
		errs []error
	)
	count := func(n *int, err error) {
		mu.Lock()
		defer mu.Unlock()
		*n++
		if err != nil {
			errs = append(errs, err)
		}
	}
	// Take every lease into the hand-off before any fn runs: g.Go blocks at
	// the concurrency limit, and a lease still merely held when this hook
	// is abandoned must not look releasable to the Release hook.
	var mine []*Lease
	for _, l := range m.snapshot(true) {
		if l.beginHandOff() { // false: lost or released since the snapshot
			mine = append(mine, l)
		}
	}
	settle := func(l *Lease, err error) {
		switch {
		case err == nil:
			count(&res.Released, nil)
		case errors.Is(err, ErrNotHeld), errors.Is(err, ErrLost):
			count(&res.Lost, nil)
		default:
			count(&res.LeftToExpire, fmt.Errorf("room %s: %w", l.ID(), err))
		}
	}
	// A flushed room may move even if the drain's deadline is near: the
	// releases get their own CallTimeout.
	q := &releaseQueue{m: m, ctx: context.WithoutCancel(ctx), done: settle}
	var g errgroup.Group
	g.SetLimit(max(concurrency, 1))
	for _, l := range mine {
		g.Go(func() error {
			if err := m.flushOne(ctx, l, fn); err != nil {
				settle(l, err)
			} else {
				q.add(l)
			}
			return nil
		})
	}
	_ = g.Wait()
	q.wait()
	m.cfg.Logger.Info("lease hand-off done", "node_id", m.cfg.Node,
		"released", res.Released, "left_to_expire", res.LeftToExpire, "lost", res.Lost)
	if res.LeftToExpire > 0 {
		return res, &handOffError{Result: res, Err: errors.Join(errs...)}
	}
	return res, nil
}

// flushOne runs fn for l. It returns nil when l may be released: fn
// succeeded and l is still held. Otherwise l is left to expire (unless it
// was lost) and the error says why.
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
	if err == nil && !l.held() {
		// Lost (or overdue for renewal) while fn ran: its work is not
		// trustworthy, and the room may have moved already.
		if err = context.Cause(lctx); err == nil {
			err = ErrLost
		}
	}
	if err != nil {
		if errors.Is(err, ErrLost) || errors.Is(context.Cause(lctx), ErrLost) {
			return ErrLost
		}
		if l.end(ErrLeftToExpire, true) {
			m.met.leftToExpire.Inc()
		}
		return err
	}
	return nil
}

// ReleaseHook returns a drain hook (phase [drain.Release]) named
// "lease-release(" + RoutePrefix + ")" that stops the renewer, deals with
// every lease still held, and deletes the node heartbeat last.
//
// Without [Config].HandOff it releases every lease, in one pipeline of
// batched compare-and-DEL scripts: a lease released here is taken to need
// no flush. With Config.HandOff (rooms have state to flush), a lease the
// hand-off did not release was not flushed, so it is left to expire, never
// released: the next owner recovers it from snapshot and log.
func (m *Manager) ReleaseHook() drain.Hook {
	return drain.Hook{Name: m.hookName("lease-release"), Phase: drain.Release, Run: m.releaseAll}
}

// hookName names one of this Manager's hooks after its RoutePrefix, so
// managers with their own keys can share a drain (which refuses a name
// used twice).
func (m *Manager) hookName(kind string) string {
	return kind + "(" + m.cfg.RoutePrefix + ")"
}

// releaseAll is the Release hook's work; see [Manager.ReleaseHook].
func (m *Manager) releaseAll(ctx context.Context) error {
	m.BeginDrain() // in case the flip did not reach us: nothing may be acquired now
	stopErr := errors.Join(m.stopRenewer(ctx), m.waitFlights(ctx))
	var release []*Lease
	for _, l := range m.snapshot(false) {
		if l.state.Load() != stateHeld {
			continue // in a hand-off that did not finish: left to expire below
		}
		if m.cfg.HandOff {
			// Rooms are flushed before they move, and this one was not
			// (the hand-off never reached it): a room not flushed is never released, so
			// its next owner recovers with a higher fence; let it expire.
			if l.end(ErrLeftToExpire, true) {
				m.met.leftToExpire.Inc()
			}
			continue
		}
		if l.end(ErrReleased, false) {
			release = append(release, l) // context cancelled before the key goes
		}
	}
	relErr := m.releaseBatch(ctx, release)
	m.abandonAll()
	return errors.Join(stopErr, relErr, m.deleteHeartbeat(ctx))
}

// releaseBatch compare-and-DELs leases in one pipeline, in batches as
// renewal does. Calls that fail are sent again, alone, while ctx lasts
// (each attempt within CallTimeout). Leases already gone or taken are not
// errors.
func (m *Manager) releaseBatch(ctx context.Context, leases []*Lease) error {
	if len(leases) == 0 {
		return nil
	}
	calls, pending, err := m.sendReleases(ctx, leases)
	var errs []error
	if err != nil && len(pending) > 0 {
		errs = append(errs, fmt.Errorf("lease: release %d leases from %s: %w", countLeases(pending), pending[0][0].label(), err))
	}
	for _, c := range calls {
		if c.err != nil {
			errs = append(errs, fmt.Errorf("lease: release %d leases from %s: %w", len(c.leases), c.leases[0].label(), c.err))
			continue
		}
		for i, l := range c.leases {
			_ = m.releaseResult(l, int64(c.status[i])) // gone or taken: nothing to undo
		}
	}
	return errors.Join(errs...)
}

// releasePipeline sends one release script call per batch in one
// pipeline and decodes the replies.
func (m *Manager) releasePipeline(ctx context.Context, batches [][]*Lease) []batchCall {
	pipe := m.client.Pipeline()
	calls := queueBatches(ctx, pipe, releaseScript, batches)
	if _, err := pipe.Exec(ctx); err != nil {
		retry := m.client.Pipeline()
		if requeueNoScript(ctx, retry, releaseScript, calls) {
			_, _ = retry.Exec(ctx)
		}
	}
	decode(calls)
	return calls
}

func countLeases(batches [][]*Lease) int {
	n := 0
	for _, b := range batches {
		n += len(b)
	}
	return n
}
