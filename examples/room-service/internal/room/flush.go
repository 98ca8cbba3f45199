package room

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// FlushRoom is the per-room hand-off on drain: it writes the room's
// snapshot under l's fencing token and drops the room's cell, so no command
// runs on it afterwards (a later command for the room tries to acquire it
// and is refused while the node drains). The cell is dropped even when the
// snapshot fails: the command log already holds every acknowledged command,
// and the caller must then leave the lease to expire instead of releasing
// it. A room this node has no cell for needs no flush: a cell is dropped
// while its lease is held only once its state is in a snapshot, here with
// an error, or when a write was fenced (the route is no longer this
// node's, so a release deletes nothing).
//
// The lease package's hand-off hook calls it for each held lease before
// releasing that lease.
func (s *Service) FlushRoom(ctx context.Context, l Lease) error {
	return s.flush(ctx, l, true)
}

// MoveRoom is FlushRoom for a room handed to another node while this one
// goes on running (balance). The cell is dropped only once the snapshot is
// written, or when the write was fenced (the room is no longer this
// node's). A room whose snapshot fails otherwise keeps its cell and its
// state and goes on here; its lease must be kept. Dropping the cell, as
// FlushRoom does, would leave a held lease without a cell, which the
// drain's hand-off takes for a room with nothing to flush and releases
// unflushed.
func (s *Service) MoveRoom(ctx context.Context, l Lease) error {
	return s.flush(ctx, l, false)
}

// flush writes the room's snapshot if it changed (reloading a state left
// unknown first) and drops its cell; a failure drops the cell only if
// dropOnFailure or the write was fenced.
func (s *Service) flush(ctx context.Context, l Lease, dropOnFailure bool) error {
	s.mu.Lock()
	c := s.cells[l.ID()]
	s.mu.Unlock()
	if c == nil {
		return nil
	}
	if err := c.lock(ctx); err != nil {
		return fmt.Errorf("flush room %s: %w", l.ID(), err)
	}
	defer c.unlock()
	if c.dropped {
		return nil
	}
	if c.lease != nil && !c.loaded {
		// An append whose reply was lost, or a failed reload, left the
		// state unknown here: the log may hold commands the cell lacks.
		if err := s.recover(ctx, c); err != nil {
			s.snapshotFailed(c.id, "room reload before flush failed", err)
			if dropOnFailure {
				s.drop(c, "not flushed")
			}
			return fmt.Errorf("flush room %s: %w", c.id, err)
		}
	}
	if c.dirty() {
		if err := s.store.snapshot(ctx, c.id, l.Token(), c.state.clone()); err != nil {
			s.snapshotFailed(c.id, "room snapshot flush failed", err)
			if dropOnFailure || errors.Is(err, ErrFenced) {
				s.drop(c, "not flushed")
			}
			return err
		}
		c.snapSeq = c.state.Seq
	}
	s.drop(c, "flushed")
	return nil
}

// SnapshotAll snapshots every room that changed since its last snapshot,
// keeping the cells, one room at a time, each write bounded by
// [Config.SnapshotWriteTimeout]. A room whose lease was lost or whose
// snapshot was fenced is dropped instead. It returns the failures joined.
func (s *Service) SnapshotAll(ctx context.Context) error {
	s.mu.Lock()
	cells := make([]*cell, 0, len(s.cells))
	for _, c := range s.cells {
		cells = append(cells, c)
	}
	s.mu.Unlock()

	var errs []error
	for _, c := range cells {
		if err := s.snapshotCell(ctx, c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Service) snapshotCell(ctx context.Context, c *cell) error {
	if err := c.lock(ctx); err != nil {
		return fmt.Errorf("snapshot room %s: %w", c.id, err)
	}
	defer c.unlock()
	switch {
	case c.dropped:
		return nil
	case c.lost():
		s.drop(c, "lease lost")
		return nil
	case !c.dirty():
		return nil
	}
	// The write holds the room: bound it on its own, so that a command for
	// the room waits at most this long behind it, not the rest of the turn.
	wctx, cancel := context.WithTimeout(ctx, s.cfg.SnapshotWriteTimeout)
	defer cancel()
	err := s.store.snapshot(wctx, c.id, c.lease.Token(), c.state.clone())
	if errors.Is(err, ErrFenced) {
		s.drop(c, "fenced")
		return nil
	}
	if err != nil {
		s.snapshotFailed(c.id, "room snapshot failed", err)
		return err
	}
	c.snapSeq = c.state.Seq
	return nil
}

// Run is the room loop: every [Config.SnapshotInterval] it beats the
// heartbeat and snapshots the rooms that changed (failures are logged and
// retried next turn). It returns nil when ctx ends, after the turn in
// progress; the caller owns the goroutine that runs it.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.SnapshotInterval)
	defer t.Stop()
	for {
		if s.cfg.Heartbeat != nil {
			s.cfg.Heartbeat.Beat()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		// A turn is bounded (one interval by default): a database that
		// hangs must not stall the loop until its heartbeat, and so
		// liveness, fails.
		tctx, cancel := context.WithTimeout(ctx, s.cfg.SnapshotTurn)
		_ = s.SnapshotAll(tctx) // logged per room; the next turn retries
		cancel()
	}
}

func (s *Service) snapshotFailed(id, msg string, err error) {
	if s.cfg.SnapshotFailures != nil {
		s.cfg.SnapshotFailures.Inc()
	}
	s.cfg.Logger.Error(msg, "room_id", id, "err", err)
}
