package main

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/examples/room-service/internal/room"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// watchEvery is how often a watched room is read again. A room's read is
// one Redis transaction, shared by every stream of this node watching it
// (feeds); a tenth of a second keeps events prompt at ten reads a second
// per watched room.
const watchEvery = 100 * time.Millisecond

// roomReader reads a room's state as recorded in Redis.
type roomReader interface {
	GetRoom(ctx context.Context, req *roompb.GetRoomRequest) (*roompb.Room, error)
}

// watcher serves RoomEvents: WatchRoom reads the room from Redis, as
// GetRoom does, so any node answers for any room, and a room's hand-over
// or its owner's drain does not interrupt its watchers. The streams of one
// room share one read (feeds). The drain of the watcher's own node ends
// the stream: fxgrpc.Server registers it with drain.Streams, which cancels
// its context when its paced turn comes and answers UNAVAILABLE with
// RetryInfo for it. So does a second of failed reads of the room
// (failedReadsLimit): a node cut off from Redis sends watchers elsewhere.
type watcher struct {
	roompb.UnimplementedRoomEventsServer
	feeds *feeds
}

// newWatcher returns the RoomEvents service; it starts nothing.
func newWatcher(r *rooms) *watcher {
	return &watcher{feeds: newFeeds(r.svc, watchEvery)}
}

// hook stops the pollers in the Close phase, after the streams that use
// them have ended (in Release) and before Redis is closed.
func (w *watcher) hook() drain.Hook {
	return drain.Hook{Name: "room.feeds", Phase: drain.Close, Run: w.feeds.Close}
}

// WatchRoom sends the room's events after after_seq, in order and each
// once, then each new one, until its context ends; heartbeats too, if the
// client asked for them (roompb.WatchHeartbeatKey).
func (w *watcher) WatchRoom(req *roompb.WatchRoomRequest, stream roompb.RoomEvents_WatchRoomServer) error {
	last, id := req.GetAfterSeq(), req.GetRoomId()
	if last < 0 {
		return status.Error(codes.InvalidArgument, fmt.Sprintf("after_seq %d: want 0 or a seq received before", last))
	}
	if err := room.ValidateRoomID(id); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	ctx := stream.Context()
	hb, err := newHeartbeat(ctx, stream, id)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	defer hb.stop()
	f := w.feeds.join(id)
	defer w.feeds.leave(id, f)
	if err := hb.send(last); err != nil {
		return err
	}
	readAgain := true // a position past the shared read is refused only on a read of our own
	for {
		ids, loaded, failing, changed := f.view() // seq n is ids[n-1]: the log has no gaps
		if failing {
			return status.Error(codes.Unavailable, fmt.Sprintf("room %s: this node's reads of it have failed for %s: watch from seq %d on another node", id, failedReadsLimit, last))
		}
		if loaded && last > int64(len(ids)) {
			if !readAgain {
				return status.Error(codes.OutOfRange, fmt.Sprintf("after_seq %d: room %s is at seq %d", last, id, len(ids)))
			}
			// The shared read may be a poll behind a seq another node sent.
			readAgain = false
			if err := w.feeds.read(ctx, id, f); err != nil {
				return status.Error(codes.Unavailable, fmt.Sprintf("after_seq %d: reading room %s: %v", last, id, err))
			}
			continue
		}
		for ; loaded && last < int64(len(ids)); last++ {
			ev := &roompb.RoomEvent{RoomId: id, Seq: last + 1, CommandId: ids[last]}
			if err := stream.Send(ev); err != nil {
				return err
			}
			hb.sent()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-hb.due():
			if err := hb.send(last); err != nil {
				return err
			}
		}
	}
}

// heartbeat sends a watch's heartbeats, if its client asked for them
// (roompb.WatchHeartbeatKey): one at once, then one whenever the period
// passed without a message.
type heartbeat struct {
	stream roompb.RoomEvents_WatchRoomServer
	room   string
	period time.Duration
	timer  *time.Timer // nil when not asked
}

func newHeartbeat(ctx context.Context, stream roompb.RoomEvents_WatchRoomServer, room string) (*heartbeat, error) {
	h := &heartbeat{stream: stream, room: room}
	v := metadata.ValueFromIncomingContext(ctx, roompb.WatchHeartbeatKey)
	if len(v) == 0 {
		return h, nil
	}
	period, err := roompb.ParseWatchHeartbeat(v[0])
	if err != nil {
		return nil, err
	}
	h.period, h.timer = period, time.NewTimer(period)
	return h, nil
}

// due is the channel of the next heartbeat: nil, never ready, when not asked.
func (h *heartbeat) due() <-chan time.Time {
	if h.timer == nil {
		return nil
	}
	return h.timer.C
}

// sent restarts the period after a message.
func (h *heartbeat) sent() {
	if h.timer != nil {
		h.timer.Reset(h.period)
	}
}

// send sends a heartbeat of a watch that sent every event up to seq.
func (h *heartbeat) send(seq int64) error {
	if h.timer == nil {
		return nil
	}
	if err := h.stream.Send(roompb.Heartbeat(h.room, seq)); err != nil {
		return err
	}
	h.sent()
	return nil
}

func (h *heartbeat) stop() {
	if h.timer != nil {
		h.timer.Stop()
	}
}
