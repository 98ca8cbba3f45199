package lease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Release ends the lease (its context first) and compare-and-DELs its key,
// retried while ctx lasts but not past the key's expiry. It returns nil if
// it deleted the key, an error wrapping [ErrNotHeld] if the key had
// expired or is someone else's (do not fail a drain on it), or the Redis
// error. A lease the drain's hand-off took is the hand-off's: Release
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
		// Released or lost before: the key may still be ours if replies were lost.
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

// releaseEach compare-and-DELs leases in batched pipelines, retried while
// ctx lasts but not past the last key's expiry, and calls done once per
// lease with what [Lease.Release] returns.
func (m *Manager) releaseEach(ctx context.Context, leases []*Lease, done func(*Lease, error)) {
	var expiry time.Time
	for _, l := range leases {
		if d := l.deadline(m.cfg.TTL); d.After(expiry) {
			expiry = d
		}
	}
	fail := func(ls []*Lease, err error) {
		for _, l := range ls {
			done(l, fmt.Errorf("lease: release %s: %w", l.label(), err))
		}
	}
	pending := m.batches(leases)
	err := m.retry(ctx, m.beforeExpiry(expiry), func(ctx context.Context) error {
		calls, _ := m.sendBatches(ctx, releaseScript, pending, nil)
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
						fail([]*Lease{l}, fmt.Errorf("expired: %w", ErrNotHeld))
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

// releaseUnknown deletes a lease of room id that no caller saw or whose
// fence nobody knows (its reply was lost), so it does not keep its room
// for a TTL. Any value of this holder may go: this runs in the room's only
// flight, while we hold no lease of it.
func (m *Manager) releaseUnknown(ctx context.Context, id string, sent time.Time) error {
	key := m.routeKey(id)
	err := m.retry(context.WithoutCancel(ctx), m.beforeExpiry(sent.Add(m.cfg.TTL)), func(ctx context.Context) error {
		return releaseHolderScript.Run(ctx, m.client, []string{key}, m.prefix).Err()
	})
	if err != nil {
		return fmt.Errorf("release %s of this holder: %w", key, err)
	}
	return nil
}
