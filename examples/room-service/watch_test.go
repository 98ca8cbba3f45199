package main

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/drain/grpcdrain"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/internal/redistest"
)

func (n *node) events(t *testing.T) roompb.RoomEventsClient {
	t.Helper()
	conn, err := grpc.NewClient(n.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return roompb.NewRoomEventsClient(conn)
}

// A watcher follows a room from a position, across its node's drain (the
// stream ends with "reconnect elsewhere" while the room is handed over) and
// a resume on another node: every event once, in order.
func TestWatchRoomResumesAcrossDrain(t *testing.T) {
	rs := redistest.Start(t)
	ctx := context.Background()
	a := startNode(t, rs.URL(), "node-a", "DRAIN_TIMEOUT=4s")
	b := startNode(t, rs.URL(), "node-b")
	apply := func(c roompb.RoomsClient, cmd string) {
		t.Helper()
		resp, err := c.Apply(ctx, &roompb.ApplyRequest{RoomId: "w1", CommandId: cmd, Op: "join"})
		require.NoError(t, err)
		require.Equal(t, roompb.ApplyResponse_APPLIED, resp.Status, cmd)
	}
	ca := a.client(t)
	for i := 1; i <= 3; i++ {
		apply(ca, fmt.Sprintf("c%d", i))
	}

	var got []string // command ids in the order received, one per seq
	last := int64(1)
	got = append(got, "c1") // the client had seq 1 already
	w, err := a.events(t).WatchRoom(ctx, &roompb.WatchRoomRequest{RoomId: "w1", AfterSeq: last})
	require.NoError(t, err)
	recv := func(w roompb.RoomEvents_WatchRoomClient) error {
		ev, err := w.Recv()
		if err != nil {
			return err
		}
		require.Equal(t, last+1, ev.Seq, "events in order, none skipped or repeated")
		last = ev.Seq
		got = append(got, ev.CommandId)
		return nil
	}
	for last < 3 {
		require.NoError(t, recv(w))
	}
	apply(ca, "c4")
	require.NoError(t, recv(w))

	a.Signal(t, syscall.SIGTERM)
	for {
		if err = recv(w); err != nil {
			break
		}
	}
	assert.True(t, grpcdrain.IsRefused(err), "the drain ended the stream with %v; want UNAVAILABLE with RetryInfo", err)
	assert.Equal(t, 0, a.ExitCode(t), a.Output())
	assert.Contains(t, a.Output(), `"name":"grpc.streams.close"`)

	cb := b.client(t)
	apply(cb, "c5") // node-b owns the room now
	w, err = b.events(t).WatchRoom(ctx, &roompb.WatchRoomRequest{RoomId: "w1", AfterSeq: last})
	require.NoError(t, err)
	for last < 5 {
		require.NoError(t, recv(w))
	}
	room, err := cb.GetRoom(ctx, &roompb.GetRoomRequest{RoomId: "w1"})
	require.NoError(t, err)
	assert.Equal(t, room.CommandIds, got, "every event once, in the room's order")

	bad, err := b.events(t).WatchRoom(ctx, &roompb.WatchRoomRequest{RoomId: "w1", AfterSeq: -1})
	if err == nil {
		_, err = bad.Recv()
	}
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "after_seq -1: %v", err)
	b.Signal(t, syscall.SIGTERM)
	assert.Equal(t, 0, b.ExitCode(t), b.Output())
}
