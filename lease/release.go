package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Release ends the lease (its context first) and compare-and-DELs its
// route, retried while ctx lasts and its session does. It returns nil once
// the route is gone (the room is free, or this node took it again
// meanwhile), an error wrapping [ErrNotHeld] if
// the session ended or the route is someone else's (do not fail a drain on
// it), or the Redis error. A lease the drain's hand-off took is the hand-off's: Release
// returns [ErrLeftToExpire] or [ErrDraining] and touches nothing. The
// lease has ended even when Release returns an error: its route may stay
// until the session ends, and the room is not this holder's to use.
func (l *Lease) Release(ctx context.Context) error {
	ended := l.state.CompareAndSwap(stateHeld, stateEnded) // by this call: the release to count
	switch {
	case ended:
		l.finish(ErrReleased)
	case l.state.Load() == stateHandingOff:
		return fmt.Errorf("lease: release %s: the drain's hand-off has it: %w", l.label(), ErrDraining)
	default: // ended, by another goroutine
		switch {
		case errors.Is(l.endedCause(), ErrLeftToExpire):
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
	l.m.releaseEach(ctx, []*Lease{l}, func(_ *Lease, e error) {
		switch {
		case e != nil:
			err = fmt.Errorf("lease: release %s: %w", l.label(), e)
		case ended:
			l.m.met.released.Inc()
		}
	})
	return err
}

// releaseFlushed releases the leases from flushed until it closes, those
// flushed during a round trip together: no flush waits for a release.
func (m *Manager) releaseFlushed(ctx context.Context, flushed <-chan *Lease, done func(*Lease, error)) {
	for l := range flushed {
		batch := []*Lease{l}
		for len(flushed) > 0 {
			batch = append(batch, <-flushed)
		}
		mine := batch[:0]
		for _, l := range batch {
			if l.end(ErrReleased) { // the context is cancelled before the key goes
				mine = append(mine, l)
				continue
			}
			// Ended meanwhile (lost, or left to expire by Stop once the hook
			// was abandoned): not released, and counted by whoever ended it.
			done(l, l.endedCause())
		}
		if len(mine) > 0 {
			m.releaseEach(ctx, mine, func(l *Lease, err error) {
				if err == nil {
					m.met.released.Inc()
				}
				done(l, err)
			})
		}
	}
}

// releaseEach compare-and-DELs the routes of leases of one session, retried
// while ctx and the session last; done gets nil or why not, which the
// caller labels (the same cause for a batch reads the same) and counts.
func (m *Manager) releaseEach(ctx context.Context, leases []*Lease, done func(*Lease, error)) {
	pending := leases
	err := m.retry(ctx, m.whileSession(leases[0].epoch), func(ctx context.Context) error {
		cmds := m.sendReleases(ctx, pending)
		var retry []*Lease
		var retryErr error // the first: a batch's calls mostly fail alike, and one cause reads better than thousands
		for i, l := range pending {
			n, err := cmds[i].Int64()
			switch {
			case err != nil && retryable(err):
				retry, retryErr = append(retry, l), cmp.Or(retryErr, err)
			case err != nil:
				done(l, err)
			case n >= 0: // release.lua: 1 deleted, 0 gone, 2 replaced by this session, -1 someone else's
				// Gone is free: nobody else deletes a route of a live session
				// (whileSession), so an earlier attempt whose reply was lost
				// did, or go-redis's own resend of one found it done; and if
				// the session has ended in Redis unseen, the room is free too.
				// Replaced: this node took the room again meanwhile.
				done(l, nil)
			default:
				done(l, fmt.Errorf("taken by another holder: %w", ErrNotHeld))
			}
		}
		pending = retry
		return retryErr
	})
	for _, l := range pending {
		done(l, err)
	}
}

// sendReleases sends a release call per lease: one alone, more in one
// pipeline per primary, concurrently.
// Not one for all: when a primary dies, go-redis sets the deadline's error
// on every command of a Cluster pipeline, answered ones included.
func (m *Manager) sendReleases(ctx context.Context, leases []*Lease) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(leases))
	if len(leases) == 1 {
		cmds[0] = releaseScript.Run(ctx, m.client, []string{leases[0].key}, leases[0].value, "")
		return cmds
	}
	send := func(which []int) {
		calls := make([]scriptCall, len(which))
		for j, i := range which {
			calls[j] = scriptCall{[]string{leases[i].key}, []any{leases[i].value, ""}}
		}
		for j, cmd := range runPipelined(ctx, m.client, releaseScript, calls, nil) {
			cmds[which[j]] = cmd
		}
	}
	groups := map[*redis.Client][]int{}
	cl, cluster := m.client.(*redis.ClusterClient)
	for i, l := range leases {
		var primary *redis.Client
		if cluster {
			primary, _ = cl.MasterForKey(ctx, l.key) // nil without a slot map: one group for those
		}
		groups[primary] = append(groups[primary], i)
	}
	var wg sync.WaitGroup
	for _, which := range groups {
		wg.Go(func() { send(which) })
	}
	wg.Wait()
	return cmds
}

// releaseUnknown deletes a route of room id that no caller will see and
// that would keep its room while the session lives: value, or with value ""
// (a reply was lost) any of the session's up to the fence counter read
// first, which release.lua's header shows can never be a later lease's.
// It retries within ctx while the session lives: callers whose route must
// go whatever their own ctx pass context.WithoutCancel.
func (m *Manager) releaseUnknown(ctx context.Context, id string, epoch int64, value string) error {
	key := m.routeKey(id)
	err := m.retry(ctx, m.whileSession(epoch), func(ctx context.Context) error {
		if value != "" {
			return releaseScript.Run(ctx, m.client, []string{key}, value, "").Err()
		}
		fence, err := m.client.Get(ctx, m.fenceKey(id)).Result()
		if errors.Is(err, redis.Nil) {
			return nil // no fence issued: no route of ours to delete
		}
		if err != nil {
			return err
		}
		return releaseScript.Run(ctx, m.client, []string{key}, m.routePrefixOf(epoch), "session", fence).Err()
	})
	if err != nil && !errors.Is(err, ErrNotHeld) { // not held: the session ended, the route with it
		return fmt.Errorf("release %s of this session: %w", key, err)
	}
	return nil
}
