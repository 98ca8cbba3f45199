package room

import "context"

// cell is one room this node serves: its lease and its state in memory.
//
// sem serializes everything done to the room (commands, snapshots, the
// flush on drain) and is held across the Redis write. That is deliberate,
// the one place this package holds a lock across I/O: the order in which
// holders of sem write IS the room's single-writer log order, and the
// in-memory state must change in that same order. It blocks only commands
// for the same room, and waiting for it honours the caller's context.
type cell struct {
	id  string
	sem chan struct{}

	// Guarded by sem.
	lease   Lease // nil until acquired
	loaded  bool  // state reflects Redis; false forces a reload before use
	dropped bool  // removed from the service: no command may run on it
	state   State
	seqOf   map[string]int64 // command id -> seq, for every command in state
	snapSeq int64            // seq covered by the last snapshot this node knows of
}

func newCell(id string) *cell {
	return &cell{id: id, sem: make(chan struct{}, 1)}
}

// lock takes the cell, or gives up when ctx ends.
func (c *cell) lock(ctx context.Context) error {
	select {
	case c.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *cell) unlock() { <-c.sem }

// load replaces the cell's state with rec, as recovered from Redis.
func (c *cell) load(rec record) {
	c.state, c.snapSeq, c.loaded = rec.State, rec.SnapshotSeq, true
	c.seqOf = make(map[string]int64, len(rec.CommandIDs))
	for i, id := range rec.CommandIDs {
		c.seqOf[id] = int64(i + 1)
	}
}

// apply adds a command the log acknowledged at seq.
func (c *cell) apply(seq int64, commandID string) error {
	if err := c.state.apply(seq, commandID); err != nil {
		return err
	}
	c.seqOf[commandID] = seq
	return nil
}

// dirty reports whether commands were applied since the last snapshot.
func (c *cell) dirty() bool { return c.loaded && c.state.Seq > c.snapSeq }

// lost reports whether the cell's lease has ended: lost, or given up by
// the drain (a flushed cell is dropped before its lease is released, so a
// live cell's lease only ends by a loss). Checked on every use, so an
// ended lease drops the cell without a watcher goroutine per room; the
// fenced scripts keep writes safe in the window before the check.
func (c *cell) lost() bool {
	return c.lease != nil && c.lease.Context().Err() != nil
}
