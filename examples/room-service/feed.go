package main

import (
	"context"
	"sync"
	"time"

	"github.com/drainkit/drainkit/examples/internal/keyed"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// feeds shares the reading of watched rooms among the WatchRoom streams of
// this node: one poller per room that at least one stream watches, however
// many streams watch it. A room's read is one Redis transaction, so two
// thousand watchers of twenty rooms cost twenty reads per poll, not two
// thousand.
//
// A poller never waits for a stream: it replaces the room's log it holds
// and wakes the streams (a closed channel), and each stream sends from its
// own position at its own pace. A slow stream therefore holds up no other,
// and loses nothing: the log it reads from is the whole log, and the next
// wake-up finds it where it stopped.
//
// The zero value is not usable; see newFeeds. Pollers start when a room
// gets its first watcher and stop when its last one leaves; Close stops
// the rest and waits for every poller.
type feeds struct {
	rooms   roomReader
	every   time.Duration
	pollers *keyed.Workers[feed]
}

// failedReadsLimit is how long a room's reads may fail before its
// watchers are told to watch elsewhere: a node cut off from Redis while
// its port still accepts would otherwise hold their streams silent for as
// long as the fault lasts, and another node may read the room. About a
// second, as a stalled backend is noticed (DESIGN.md); a resume loses
// nothing.
const failedReadsLimit = time.Second

// feed is the shared read of one room.
type feed struct {
	mu           sync.Mutex
	ids          []string // the log as last read: seq n is ids[n-1]; never changed in place
	loaded       bool
	readAt       time.Time     // when the last read that did not fail ended
	failingSince time.Time     // when the first of the reads failing since then began, or readAt if later; zero if none
	failing      bool          // reads have failed for failedReadsLimit
	changed      chan struct{} // closed when ids grows or failing is set, then replaced
}

// newFeeds returns feeds reading rooms every interval. It starts nothing.
func newFeeds(rooms roomReader, every time.Duration) *feeds {
	return &feeds{rooms: rooms, every: every, pollers: keyed.New[feed]()}
}

// join returns the room's feed, starting its poller if it has none; the
// caller calls leave once with it when done.
func (fs *feeds) join(id string) *feed {
	return fs.pollers.Join(id, func() *feed { return &feed{changed: make(chan struct{})} },
		func(ctx context.Context, f *feed) { fs.poll(ctx, id, f) })
}

// leave drops one watcher of the room; the last one stops its poller.
func (fs *feeds) leave(id string, f *feed) { fs.pollers.Leave(id, f) }

// Close stops every poller and waits for them, or for ctx.
func (fs *feeds) Close(ctx context.Context) error { return fs.pollers.Close(ctx) }

// poll reads the room now and every fs.every until ctx ends. A failed read
// is tried again at the next tick: the watchers see no new events
// meanwhile, and miss none.
func (fs *feeds) poll(ctx context.Context, id string, f *feed) {
	tick := time.NewTicker(fs.every)
	defer tick.Stop()
	for {
		_ = fs.read(ctx, id, f)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// read reads the room now into f, for the poller, or for a watcher that
// cannot tell a position past the end from a read a poll behind.
func (fs *feeds) read(ctx context.Context, id string, f *feed) error {
	began := time.Now()
	rctx, cancel := context.WithTimeout(ctx, callBudget)
	defer cancel()
	room, err := fs.rooms.GetRoom(rctx, &roompb.GetRoomRequest{RoomId: id})
	if err != nil {
		if ctx.Err() == nil { // not the caller leaving
			f.failed(began)
		}
		return err
	}
	f.update(room.GetCommandIds())
	return nil
}

// failed records a failed read that began at began, and wakes the
// watchers once reads have failed for failedReadsLimit: counted from the
// first failed read's start, since one that hung for its whole budget was
// failing all along, but never from before a read that did not fail.
func (f *feed) failed(began time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failingSince.IsZero() {
		f.failingSince = began
		if began.Before(f.readAt) {
			f.failingSince = f.readAt
		}
	}
	if !f.failing && time.Since(f.failingSince) >= failedReadsLimit {
		f.failing = true
		f.wake()
	}
}

// wake closes changed and replaces it; f.mu is held.
func (f *feed) wake() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// update records the log read, and wakes the watchers when it grew or is
// the first read.
func (f *feed) update(ids []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readAt, f.failingSince, f.failing = time.Now(), time.Time{}, false
	if f.loaded && len(ids) <= len(f.ids) {
		return
	}
	f.ids, f.loaded = ids, true
	f.wake()
}

// view returns the log as last read (nil and false before the first read),
// whether reads have failed for failedReadsLimit, and a channel closed when
// either next changes.
func (f *feed) view() (ids []string, loaded, failing bool, changed <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ids, f.loaded, f.failing, f.changed
}
