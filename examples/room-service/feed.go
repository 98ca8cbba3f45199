package main

import (
	"context"
	"sync"
	"time"

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
	rooms roomReader
	every time.Duration

	ctx    context.Context // the pollers' lifetime
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	byID   map[string]*feed
	closed bool // no poller starts after Close
}

// feed is the shared read of one room.
type feed struct {
	refs int                // streams watching; guarded by feeds.mu
	stop context.CancelFunc // ends the poller

	mu      sync.Mutex
	ids     []string // the log as last read: seq n is ids[n-1]; never changed in place
	loaded  bool
	changed chan struct{} // closed when ids grows, then replaced
}

// newFeeds returns feeds reading rooms every interval. It starts nothing.
func newFeeds(rooms roomReader, every time.Duration) *feeds {
	ctx, cancel := context.WithCancel(context.Background())
	return &feeds{rooms: rooms, every: every, ctx: ctx, cancel: cancel, byID: map[string]*feed{}}
}

// join returns the room's feed, starting its poller if it has none; the
// caller calls leave once with it when done.
func (fs *feeds) join(id string) *feed {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f := fs.byID[id]
	if f == nil {
		ctx, stop := context.WithCancel(fs.ctx)
		f = &feed{stop: stop, changed: make(chan struct{})}
		fs.byID[id] = f
		if !fs.closed {
			fs.wg.Go(func() { fs.poll(ctx, id, f) })
		}
	}
	f.refs++
	return f
}

// leave drops one watcher of the room; the last one stops its poller.
func (fs *feeds) leave(id string, f *feed) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f.refs--; f.refs == 0 {
		delete(fs.byID, id)
		f.stop()
	}
}

// Close stops every poller and waits for them, or for ctx.
func (fs *feeds) Close(ctx context.Context) error {
	fs.mu.Lock()
	fs.closed = true
	fs.mu.Unlock()
	fs.cancel()
	done := make(chan struct{})
	go func() { defer close(done); fs.wg.Wait() }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// poll reads the room now and every fs.every until ctx ends. A failed read
// is tried again at the next tick: the watchers see no new events
// meanwhile, and miss none.
func (fs *feeds) poll(ctx context.Context, id string, f *feed) {
	tick := time.NewTicker(fs.every)
	defer tick.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, callBudget)
		room, err := fs.rooms.GetRoom(rctx, &roompb.GetRoomRequest{RoomId: id})
		cancel()
		if err == nil {
			f.update(room.GetCommandIds())
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// update records the log read, and wakes the watchers when it grew or is
// the first read.
func (f *feed) update(ids []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loaded && len(ids) <= len(f.ids) {
		return
	}
	f.ids, f.loaded = ids, true
	close(f.changed)
	f.changed = make(chan struct{})
}

// view returns the log as last read (nil and false before the first read)
// and a channel closed when it next changes.
func (f *feed) view() ([]string, bool, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ids, f.loaded, f.changed
}
