package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// releaseQueue releases the leases a hand-off has flushed, many per round
// trip: while a pipeline is in flight, flushed leases queue for the next.
// A room moves within a round trip of its flush, and flushes never wait
// for a release.
type releaseQueue struct {
	m    *Manager
	ctx  context.Context           // the releases' own: not cut short by the drain's deadline
	done func(l *Lease, err error) // each lease's result, as Lease.Release returns it

	senders sync.WaitGroup
	mu      sync.Mutex
	queued  []*Lease
	sending bool
}

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
func (q *releaseQueue) wait() { q.senders.Wait() }

func (q *releaseQueue) send() {
	for {
		q.mu.Lock()
		batch := q.queued
		q.queued, q.sending = nil, len(batch) > 0
		q.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		for _, l := range batch {
			l.end(ErrReleased, false) // the context is cancelled before the key goes
		}
		for i, err := range q.m.releaseEach(q.ctx, batch) {
			q.done(batch[i], err)
		}
	}
}

// releaseEach compare-and-DELs leases in batched pipelines and returns one
// result per lease, in order, as [Lease.Release] would.
func (m *Manager) releaseEach(ctx context.Context, leases []*Lease) []error {
	errs := make([]error, len(leases))
	at := make(map[*Lease]int, len(leases))
	for i, l := range leases {
		at[l] = i
	}
	pending := m.batches(leases)
	err := m.retry(ctx, nil, func(ctx context.Context) error {
		calls, _ := m.sendBatches(ctx, releaseScript, pending, nil, nil)
		pending = pending[:0]
		var retryErrs []error
		for _, c := range calls {
			if c.err != nil && retryable(c.err) {
				pending = append(pending, c.leases)
				retryErrs = append(retryErrs, c.err)
				continue
			}
			for i, l := range c.leases {
				if c.err != nil {
					errs[at[l]] = fmt.Errorf("lease: release %s: %w", l.label(), c.err)
				} else {
					errs[at[l]] = m.releaseResult(l, int64(c.status[i]))
				}
			}
		}
		return errors.Join(retryErrs...)
	})
	for _, b := range pending {
		for _, l := range b {
			errs[at[l]] = fmt.Errorf("lease: release %s: %w", l.label(), err)
		}
	}
	return errs
}
