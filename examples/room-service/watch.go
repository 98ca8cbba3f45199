package main

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// watchEvery is how often a WatchRoom stream reads its room again. A room's
// read is one Redis transaction; a tenth of a second keeps events prompt
// without a subscriber costing more than ten reads a second.
const watchEvery = 100 * time.Millisecond

// roomReader reads a room's state as recorded in Redis.
type roomReader interface {
	GetRoom(ctx context.Context, req *roompb.GetRoomRequest) (*roompb.Room, error)
}

// watcher serves RoomEvents: WatchRoom reads the room from Redis, as
// GetRoom does, so any node answers for any room, and a room's hand-over
// or its owner's drain does not interrupt its watchers. The drain of the
// watcher's own node ends the stream: fxgrpc.Server registers it with
// drain.Streams, which cancels its context when its paced turn comes and
// answers UNAVAILABLE with RetryInfo for it.
type watcher struct {
	roompb.UnimplementedRoomEventsServer
	rooms roomReader
	every time.Duration
}

// registerEvents puts RoomEvents on the gRPC server beside Rooms.
func registerEvents(s *grpc.Server, r *rooms) {
	roompb.RegisterRoomEventsServer(s, &watcher{rooms: r.svc, every: watchEvery})
}

// WatchRoom sends the room's events after after_seq, in order and each
// once, then each new one, until its context ends.
func (w *watcher) WatchRoom(req *roompb.WatchRoomRequest, stream roompb.RoomEvents_WatchRoomServer) error {
	last := req.GetAfterSeq()
	if last < 0 {
		return status.Error(codes.InvalidArgument, fmt.Sprintf("after_seq %d: want 0 or a seq received before", last))
	}
	ctx := stream.Context()
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	for {
		room, err := w.rooms.GetRoom(ctx, &roompb.GetRoomRequest{RoomId: req.GetRoomId()})
		if err != nil {
			return err
		}
		ids := room.GetCommandIds() // seq n is ids[n-1]: the log has no gaps
		if last > int64(len(ids)) {
			return status.Error(codes.OutOfRange, fmt.Sprintf("after_seq %d: room %s is at seq %d", last, req.GetRoomId(), len(ids)))
		}
		for ; last < int64(len(ids)); last++ {
			ev := &roompb.RoomEvent{RoomId: req.GetRoomId(), Seq: last + 1, CommandId: ids[last]}
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
