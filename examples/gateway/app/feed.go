package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/examples/internal/keyed"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// defaultFeedEvents is how many of a room's latest events a feed keeps for
// its subscribers (between once and twice as many): one that falls further
// behind catches up from the room's log instead.
const defaultFeedEvents = 1024

// catchUpTimeout bounds one read of a room's log for a subscriber that is
// behind its feed.
const catchUpTimeout = 5 * time.Second

// feeds shares one upstream WatchRoom per room among the subscribers of
// this gateway: two thousand subscribers of twenty rooms cost twenty
// streams to room-service, not two thousand.
//
// A feed keeps the room's latest events in a bounded buffer and wakes its
// subscribers (a closed channel) as events arrive; it never waits for a
// subscriber. Each subscriber sends from its own position at its own pace,
// so a slow one holds up no other; one that falls behind the buffer, or
// joins with an older position, reads the events it lacks from the room's
// log (GetRoom) and carries on from the buffer: nothing is lost or
// repeated. When a backend ends the watch (it drains), or stops sending
// its heartbeats (a stopped process), the feed watches again on another
// from its last event.
//
// A room's feed starts with its first subscriber and stops when its last
// one leaves; Close stops the rest and waits for them.
type feeds struct {
	b          *backends
	capacity   int
	watches    *keyed.Workers[feed]
	heartbeats beating
}

// feed is the shared upstream watch of one room.
type feed struct {
	start int64 // the seq the first watch started after

	mu      sync.Mutex
	first   int64    // seq of buf[0]
	buf     [][]byte // the SSE frames of seqs first, first+1, …, made once for every subscriber
	err     error    // the watch was refused for good (a position past the room's end)
	changed chan struct{}
}

func newFeeds(b *backends, capacity int) *feeds {
	return &feeds{b: b, capacity: capacity, watches: keyed.New[feed]()}
}

// join returns the room's feed, starting one that watches after after when
// the room has none; the caller calls leave once with it when done.
func (fs *feeds) join(id string, after int64) *feed {
	return fs.watches.Join(id, func() *feed { return &feed{start: after, first: after + 1, changed: make(chan struct{})} },
		func(ctx context.Context, f *feed) { fs.run(ctx, id, f) })
}

// leave drops one subscriber of the room; the last one stops its watch.
func (fs *feeds) leave(id string, f *feed) { fs.watches.Leave(id, f) }

// forget removes a failed feed, so the next subscriber starts a new one.
func (fs *feeds) forget(id string, f *feed) { fs.watches.Forget(id, f) }

// Close stops every feed and waits for them, or for ctx.
func (fs *feeds) Close(ctx context.Context) error { return fs.watches.Close(ctx) }

// run watches the room from f.start until ctx ends, again from its last
// event on the next backend whenever a backend ends the watch.
func (fs *feeds) run(ctx context.Context, id string, f *feed) {
	after, leave := f.start, ""
	for {
		var err error
		after, leave, err = fs.watch(ctx, id, after, f, leave)
		switch code := status.Code(err); {
		case ctx.Err() != nil:
			return
		case code == codes.InvalidArgument || code == codes.OutOfRange:
			// Forget first: a subscriber that sees the failure joins
			// again (events.go), and must get a new feed, not this one.
			fs.forget(id, f)
			f.fail(err)
			return
		}
		// The backend drained (UNAVAILABLE with RetryInfo), its reads of the
		// room failed, or it broke: watch again from the last seq received,
		// on another backend while one is ready.
		if !pause(ctx) {
			return
		}
	}
}

// pause waits rewatchBackoff, jittered by ±half, and reports whether ctx
// was still live at its end.
func pause(ctx context.Context) bool {
	t := time.NewTimer(time.Duration(float64(rewatchBackoff) * (0.5 + rand.Float64())))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// The heartbeats a watch asks for, and how long a watch that has sent one
// may then be silent before its backend is taken for stalled: a stopped
// process keeps its connections open, and a quiet room sends nothing, so
// only a heartbeat tells them apart. Four periods, so that one late
// heartbeat (a GC pause, a loaded node) is no stall.
const (
	watchHeartbeat = 250 * time.Millisecond
	watchStall     = 4 * watchHeartbeat
)

// heartbeatMemory is how long a backend address counts as one that sends
// heartbeats after its last: a watch opened on it is judged from its start,
// since a frozen process sends no first heartbeat. Pods come and go with
// their addresses; an address is forgotten after this.
const heartbeatMemory = 10 * time.Minute

// beating holds the backend addresses that sent heartbeats, and when last.
type beating struct {
	mu sync.Mutex
	at map[string]time.Time
}

// saw records a heartbeat from addr, and forgets the addresses silent for
// heartbeatMemory.
func (b *beating) saw(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if b.at == nil {
		b.at = make(map[string]time.Time)
	}
	if last, ok := b.at[addr]; !ok || now.Sub(last) > time.Second { // prune on a new address, or one silent for a second
		for a, t := range b.at {
			if now.Sub(t) > heartbeatMemory {
				delete(b.at, a)
			}
		}
	}
	b.at[addr] = now
}

// forget drops addr: it answered without heartbeats.
func (b *beating) forget(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.at, addr)
}

// sends reports whether addr sent a heartbeat within heartbeatMemory.
func (b *beating) sends(addr string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.at[addr]
	return ok && time.Since(t) <= heartbeatMemory
}

// watch watches the room on the balanced connection from after, on
// another backend than leave if one is ready, adding each event to f; it
// returns the last seq received, the backend's address and why it ended.
// A backend the judge takes for stalled is marked so, and the next watch
// goes elsewhere.
func (fs *feeds) watch(ctx context.Context, id string, after int64, f *feed, leave string) (int64, string, error) {
	conn := fs.b.conn()
	if conn == nil {
		return after, "", errNotStarted
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var pk pick
	j := &judge{fs: fs, pk: &pk, cancel: cancel}
	defer j.stop()
	wctx = metadata.AppendToOutgoingContext(withWatchPick(wctx, fs.b.stalls, leave, &pk), roompb.WatchHeartbeatKey, watchHeartbeat.String())
	stream, err := roompb.NewRoomEventsClient(conn).WatchRoom(wctx, &roompb.WatchRoomRequest{RoomId: id, AfterSeq: after}, grpc.WaitForReady(true))
	if err != nil {
		return after, j.addr(), err
	}
	j.start()
	for {
		ev, err := stream.Recv()
		if err != nil {
			if j.silent.Load() {
				addr := j.addr()
				if addr != "" {
					fs.b.stalls.mark(addr)
				}
				return after, addr, status.Errorf(codes.Unavailable, "room %s: backend %s sent nothing for %s", id, addr, watchStall)
			}
			return after, j.addr(), err
		}
		j.message(roompb.IsHeartbeat(ev))
		if roompb.IsHeartbeat(ev) {
			if ev.GetSeq() != after {
				return after, j.addr(), status.Errorf(codes.Internal, "room %s: heartbeat at seq %d after %d", id, ev.GetSeq(), after)
			}
			continue
		}
		if ev.GetSeq() != after+1 { // a backend must not skip or repeat
			return after, j.addr(), status.Errorf(codes.Internal, "room %s: event seq %d after %d", id, ev.GetSeq(), after)
		}
		after++
		f.add(frame(id, after, ev.GetCommandId()), fs.capacity)
	}
}

// judge takes a watch's backend for stalled once it is silent for
// watchStall: after a heartbeat on this stream, or from the start on an
// address that sent heartbeats before (a stopped process sends no first
// one), unless the process still answers a health check then: a
// room-service without heartbeats now serves that address (a rollback),
// which is forgotten and not judged until it sends one.
type judge struct {
	fs     *feeds
	pk     *pick
	cancel context.CancelFunc
	timer  *time.Timer // set and reset on the watch's goroutine only
	beats  atomic.Bool // a heartbeat came on this stream
	off    atomic.Bool // the address answered without heartbeats: not judged until one comes
	silent atomic.Bool // judged stalled: the watch was cancelled for it
}

// addr is the backend's address, read at each use: grpc-go may pick again
// (a transparent retry of a stream refused by a draining backend).
func (j *judge) addr() string {
	a, _ := j.pk.get()
	return a
}

func (j *judge) start() {
	if j.fs.heartbeats.sends(j.addr()) {
		j.arm()
	}
}

func (j *judge) arm() {
	if j.timer == nil {
		j.timer = time.AfterFunc(watchStall, j.fire)
		return
	}
	j.timer.Reset(watchStall)
}

func (j *judge) fire() {
	if !j.beats.Load() && j.fs.b.answers(j.addr()) {
		j.fs.heartbeats.forget(j.addr())
		j.off.Store(true)
		return
	}
	j.silent.Store(true)
	j.cancel()
}

// message restarts the silence after a message on the stream.
func (j *judge) message(heartbeat bool) {
	switch {
	case heartbeat:
		j.beats.Store(true)
		j.off.Store(false)
		j.fs.heartbeats.saw(j.addr())
		j.arm()
	case j.timer != nil && !j.off.Load():
		j.timer.Reset(watchStall)
	}
}

func (j *judge) stop() {
	if j.timer != nil {
		j.timer.Stop()
	}
}

// add appends the next event, dropping the oldest once the buffer holds
// twice capacity (so it is copied once per capacity events, not per event).
func (f *feed) add(frame []byte, capacity int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf = append(f.buf, frame)
	if len(f.buf) >= 2*capacity {
		keep := make([][]byte, capacity, 2*capacity)
		drop := copy(keep, f.buf[len(f.buf)-capacity:])
		drop = len(f.buf) - drop
		f.buf, f.first = keep, f.first+int64(drop)
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *feed) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
	close(f.changed)
	f.changed = make(chan struct{})
}

// since returns the frames of the events after seq after that the buffer
// holds (shared: not to be changed); behind when it no longer holds seq
// after+1; a channel closed at the next change; and the error that ended
// the feed.
func (f *feed) since(after int64) (frames [][]byte, behind bool, changed <-chan struct{}, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if after+1 < f.first {
		return nil, true, f.changed, f.err
	}
	if i := after + 1 - f.first; i < int64(len(f.buf)) {
		frames = f.buf[i:len(f.buf):len(f.buf)] // add appends past it or copies: never writes into it
	}
	return frames, false, f.changed, f.err
}

// frame is the SSE event of a room's command at seq.
func frame(id string, seq int64, commandID string) []byte {
	data, _ := json.Marshal(event{RoomID: id, Seq: seq, CommandID: commandID})
	return fmt.Appendf(nil, "id: %d\nevent: command\ndata: %s\n\n", seq, data)
}

// head is the last seq the feed has.
func (f *feed) head() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first + int64(len(f.buf)) - 1
}

// readLog reads the room's whole log (seq n is ids[n-1]) from any backend,
// trying again until ctx ends.
func (fs *feeds) readLog(ctx context.Context, id string) ([]string, error) {
	for {
		conn := fs.b.conn()
		err := errNotStarted
		if conn != nil {
			var room *roompb.Room
			cctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
			room, err = roompb.NewRoomsClient(conn).GetRoom(withRoute(cctx, "", fs.b.stalls), &roompb.GetRoomRequest{RoomId: id}, grpc.WaitForReady(true))
			cancel()
			if err == nil {
				return room.GetCommandIds(), nil
			}
		}
		if code := status.Code(err); code == codes.InvalidArgument || ctx.Err() != nil {
			return nil, errors.Join(err, ctx.Err())
		}
		if !pause(ctx) {
			return nil, ctx.Err()
		}
	}
}

// errPastEnd is a subscriber's position past the room's last event.
func errPastEnd(id string, after int64, seq int) error {
	return status.Error(codes.OutOfRange, fmt.Sprintf("after_seq %d: room %s is at seq %d", after, id, seq))
}
