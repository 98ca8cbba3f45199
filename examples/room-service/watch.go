package main

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
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
// once, then each new one, until its context ends.
func (w *watcher) WatchRoom(req *roompb.WatchRoomRequest, stream roompb.RoomEvents_WatchRoomServer) error {
	last, id := req.GetAfterSeq(), req.GetRoomId()
	if last < 0 {
		return status.Error(codes.InvalidArgument, fmt.Sprintf("after_seq %d: want 0 or a seq received before", last))
	}
	if err := room.ValidateRoomID(id); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	f := w.feeds.join(id)
	defer w.feeds.leave(id, f)
	ctx := stream.Context()
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
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}
