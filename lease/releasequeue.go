package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// releaseQueue releases the leases a hand-off has flushed, many per round
// trip. add queues a lease and returns at once; if no pipeline is in
// flight, it starts a sender that sends everything queued, and keeps
// sending until the queue is empty. So a room moves within one round trip
// of its flush, as with one release call per room, while the flushes go
// on (a flush slot is not held waiting for a release), and 10,000 rooms
// cost a few pipelines instead of 10,000 round trips.
type releaseQueue struct {
	m    *Manager
	ctx  context.Context           // the releases' own: not cut short by the drain's deadline
	done func(l *Lease, err error) // each lease's result, as Lease.Release returns it

	senders sync.WaitGroup
	mu      sync.Mutex
	queued  []*Lease
	sending bool
}

// add queues l for release.
func (q *releaseQueue) add(l *Lease) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queued = append(q.queued, l)
	if !q.sending {
		q.sending = true
		q.senders.Go(q.send)
	}
}

// wait returns once every lease added has been released and reported.
// No add may follow or run concurrently.
func (q *releaseQueue) wait() { q.senders.Wait() }

// send releases what is queued, one pipeline at a time, until nothing is.
func (q *releaseQueue) send() {
	for {
		q.mu.Lock()
		batch := q.queued
		q.queued = nil
		if len(batch) == 0 {
			q.sending = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		for _, l := range batch {
			l.end(ErrReleased, false) // the context is cancelled before the key goes
		}
		errs := q.m.releaseEach(q.ctx, batch)
		for i, l := range batch {
			q.done(l, errs[i])
		}
	}
}

// releaseEach compare-and-DELs leases in one pipeline, in batches, and
// returns one result per lease, in order: nil if deleted, an error
// wrapping [ErrNotHeld] if it had expired or was someone else's, or the
// Redis error.
func (m *Manager) releaseEach(ctx context.Context, leases []*Lease) []error {
	errs := make([]error, len(leases))
	at := make(map[*Lease]int, len(leases))
	for i, l := range leases {
		at[l] = i
	}
	calls, failed, err := m.sendReleases(ctx, leases)
	for _, b := range failed {
		for _, l := range b {
			errs[at[l]] = fmt.Errorf("lease: release %s: %w", l.label(), err)
		}
	}
	for _, c := range calls {
		for i, l := range c.leases {
			if c.err != nil {
				errs[at[l]] = fmt.Errorf("lease: release %s: %w", l.label(), c.err)
				continue
			}
			errs[at[l]] = m.releaseResult(l, int64(c.status[i]))
		}
	}
	return errs
}

// sendReleases sends leases' compare-and-DELs in one pipeline, in batches
// as renewal does; calls that fail in a way another attempt may fix are
// sent again while ctx lasts (each attempt within CallTimeout). It returns
// the calls answered (each with its statuses or its final error), and the
// batches still failing when the retries ended, with the last error.
func (m *Manager) sendReleases(ctx context.Context, leases []*Lease) ([]batchCall, [][]*Lease, error) {
	var calls []batchCall
	pending := m.batches(leases)
	err := m.retry(ctx, func(ctx context.Context) error {
		sent := m.releasePipeline(ctx, pending)
		pending = pending[:0]
		var errs []error
		for _, c := range sent {
			if c.err != nil && retryable(c.err) {
				pending = append(pending, c.leases)
				errs = append(errs, c.err)
				continue
			}
			calls = append(calls, c)
		}
		return errors.Join(errs...)
	})
	if err == nil {
		pending = nil
	}
	return calls, pending, err
}
