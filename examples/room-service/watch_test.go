package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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

// xranges is how many XRANGE commands the Redis server has run: a room's
// read (GetRoom, a WatchRoom poll) is one.
func xranges(t *testing.T, rs *redistest.Server) int {
	t.Helper()
	info, err := rs.Client().Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	for line := range strings.SplitSeq(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_xrange:calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			require.NoError(t, err)
			return n
		}
	}
	return 0
}

// The watchers of one room share one read of it per poll, however many
// they are, and one that does not read holds up no other and misses
// nothing.
func TestWatchRoomSharesOneReadPerRoom(t *testing.T) {
	const watchers, commands = 50, 20
	rs := redistest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := startNode(t, rs.URL(), "node-a")
	ca, ev := a.client(t), a.events(t)
	apply := func(cmd string) {
		t.Helper()
		resp, err := ca.Apply(ctx, &roompb.ApplyRequest{RoomId: "f1", CommandId: cmd, Op: "join"})
		require.NoError(t, err)
		require.Equal(t, roompb.ApplyResponse_APPLIED, resp.Status, cmd)
	}
	apply("c0")
	slow, err := ev.WatchRoom(ctx, &roompb.WatchRoomRequest{RoomId: "f1"}) // read only at the end
	require.NoError(t, err)
	streams := make([]roompb.RoomEvents_WatchRoomClient, watchers)
	for i := range streams {
		streams[i], err = ev.WatchRoom(ctx, &roompb.WatchRoomRequest{RoomId: "f1"})
		require.NoError(t, err)
	}
	var want []string
	recvAll := func(s roompb.RoomEvents_WatchRoomClient, who string) {
		t.Helper()
		for i, id := range want {
			got, err := s.Recv()
			require.NoError(t, err, who)
			require.Equal(t, int64(i+1), got.Seq, "%s: events in order, none skipped or repeated", who)
			require.Equal(t, id, got.CommandId, who)
		}
	}
	want = append(want, "c0")
	for i, s := range streams { // every watcher has joined and read once
		recvAll(s, fmt.Sprintf("watcher %d", i))
	}

	began, before := time.Now(), xranges(t, rs)
	for i := 1; i <= commands; i++ {
		apply(fmt.Sprintf("c%d", i))
		want = append(want, fmt.Sprintf("c%d", i))
	}
	for i, s := range streams {
		for seq := int64(2); seq <= commands+1; seq++ {
			got, err := s.Recv()
			require.NoError(t, err)
			require.Equal(t, seq, got.Seq, "watcher %d: events in order, none skipped or repeated", i)
			require.Equal(t, want[seq-1], got.CommandId)
		}
	}
	reads, polls := xranges(t, rs)-before, int(time.Since(began)/watchEvery)+1
	// One poller reads once per poll; a read per watcher would be 51 times that.
	assert.LessOrEqual(t, reads, 2*polls+5, "room reads in %s: got %d; want about one per %s for all %d watchers", time.Since(began), reads, watchEvery, watchers+1)
	recvAll(slow, "the watcher that read last")
}
