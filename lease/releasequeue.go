package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// releaseQueue releases the leases a hand-off has flushed, many per round
// trip: a caller whose lease is ready queues it; if no pipeline is in
// flight, it sends one with everything queued and keeps sending until the
// queue is empty, answering every waiter. So a room moves within one round
// trip of its flush, as with one release call per room, while 10,000
// rooms cost a few pipelines instead of 10,000 round trips.
type releaseQueue struct {
	m   *Manager
	ctx context.Context // the releases' own: not cut short by the drain's deadline

	mu      sync.Mutex
	queued  []releaseReq
	sending bool
}

type releaseReq struct {
	l    *Lease
	done chan error // size 1
}

// release ends l (its context is cancelled before the key goes) and
// compare-and-DELs it, and returns what [Lease.Release] would.
func (q *releaseQueue) release(l *Lease) error {
	req := releaseReq{l: l, done: make(chan error, 1)}
	q.mu.Lock()
	q.queued = append(q.queued, req)
	if q.sending {
		q.mu.Unlock()
		return <-req.done
	}
	q.sending = true
	q.mu.Unlock()
	for {
		q.mu.Lock()
		batch := q.queued
		q.queued = nil
		if len(batch) == 0 {
			q.sending = false
			q.mu.Unlock()
			return <-req.done
		}
		q.mu.Unlock()
		q.send(batch)
	}
}

// send releases batch in one pipeline (retried within q.ctx) and answers
// each request.
func (q *releaseQueue) send(batch []releaseReq) {
	leases := make([]*Lease, len(batch))
	for i, r := range batch {
		r.l.end(ErrReleased, false)
		leases[i] = r.l
	}
	errs := q.m.releaseEach(q.ctx, leases)
	for i, r := range batch {
		r.done <- errs[i]
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
			errs[at[l]] = fmt.Errorf("lease: release %s: %w", l, err)
		}
	}
	for _, c := range calls {
		for i, l := range c.leases {
			if c.err != nil {
				errs[at[l]] = fmt.Errorf("lease: release %s: %w", l, c.err)
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
