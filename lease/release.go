package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// Per-key replies of the release script.
const (
	keyOurs = 1
	keyGone = 0
)

// Release ends the lease (its context first) and compare-and-DELs its
// route, retried while ctx lasts and its session does. It returns nil if
// it deleted the route, an error wrapping [ErrNotHeld] if the session
// ended or the route is someone else's (do not fail a drain on it), or the
// Redis error. A lease the drain's hand-off took is the hand-off's: Release
// returns [ErrLeftToExpire] or [ErrDraining] and touches nothing.
func (l *Lease) Release(ctx context.Context) error {
	switch {
	case l.state.CompareAndSwap(stateHeld, stateEnded):
		l.finish(ErrReleased, false)
	case l.state.Load() == stateHandingOff:
		return fmt.Errorf("lease: release %s: the drain's hand-off has it: %w", l.label(), ErrDraining)
	default: // ended: wait for the goroutine that ended it to set the cause
		lctx := l.Context()
		<-lctx.Done()
		switch {
		case errors.Is(context.Cause(lctx), ErrLeftToExpire):
			return fmt.Errorf("lease: release %s: %w", l.label(), ErrLeftToExpire)
		case l.state.Load() == stateHandedOff:
			return fmt.Errorf("lease: release %s: the drain's hand-off had it: %w", l.label(), ErrDraining)
		}
		// Released or lost before: the route may still be ours if replies were lost.
	}
	if s := l.m.sess.Load(); s == nil || s.epoch != l.epoch {
		return fmt.Errorf("lease: release %s: its session ended: %w", l.label(), ErrNotHeld)
	}
	var err error
	l.m.releaseEach(ctx, []*Lease{l}, func(_ *Lease, e error) { err = e })
	return err
}

// releaseFlushed releases the leases from flushed until it is closed,
// those flushed during a round trip together in the next, so no flush
// waits for a release. flushed must have room for every lease.
func (m *Manager) releaseFlushed(ctx context.Context, flushed <-chan *Lease, done func(*Lease, error)) {
	for l := range flushed {
		batch := []*Lease{l}
		for len(flushed) > 0 {
			batch = append(batch, <-flushed)
		}
		for _, l := range batch {
			l.end(ErrReleased, false) // the context is cancelled before the key goes
		}
		m.releaseEach(ctx, batch, done)
	}
}

// releaseEach compare-and-DELs the routes of leases of one session in
// batched pipelines, retried while ctx and the session last, and calls
// done once per lease with what [Lease.Release] returns.
func (m *Manager) releaseEach(ctx context.Context, leases []*Lease, done func(*Lease, error)) {
	if len(leases) == 0 {
		return
	}
	fail := func(ls []*Lease, err error) {
		for _, l := range ls {
			done(l, fmt.Errorf("lease: release %s: %w", l.label(), err))
		}
	}
	pending := m.batches(leases)
	err := m.retry(ctx, m.whileSession(leases[0].epoch), func(ctx context.Context) error {
		calls, _ := m.sendBatches(ctx, releaseScript, pending)
		pending = pending[:0]
		var retryErrs []error
		for _, c := range calls {
			switch {
			case c.err != nil && retryable(c.err):
				pending = append(pending, c.leases)
				retryErrs = append(retryErrs, c.err)
			case c.err != nil:
				fail(c.leases, c.err)
			default:
				for i, l := range c.leases {
					switch c.status[i] {
					case keyOurs:
						m.met.released.Inc()
						done(l, nil)
					case keyGone:
						fail([]*Lease{l}, fmt.Errorf("gone: %w", ErrNotHeld))
					default:
						fail([]*Lease{l}, fmt.Errorf("taken by another holder: %w", ErrNotHeld))
					}
				}
			}
		}
		return errors.Join(retryErrs...)
	})
	for _, b := range pending {
		fail(b, err)
	}
}

// releaseUnknown deletes a route of room id that no caller saw or whose
// fence nobody knows (its reply was lost), so it does not keep its room
// while the session lives. Any value of this session may go: this runs in
// the room's only flight, while we hold no lease of it.
func (m *Manager) releaseUnknown(ctx context.Context, id string, epoch int64) error {
	key := m.routeKey(id)
	prefix := m.cfg.Node + "|" + strconv.FormatInt(epoch, 10) + "|"
	err := m.retry(context.WithoutCancel(ctx), m.whileSession(epoch), func(ctx context.Context) error {
		return releaseSessionScript.Run(ctx, m.client, []string{key}, prefix).Err()
	})
	if err != nil {
		return fmt.Errorf("release %s of this session: %w", key, err)
	}
	return nil
}
