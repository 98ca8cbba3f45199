package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/drain/grpcdrain"
	"github.com/drainkit/drainkit/examples/room-service/internal/room"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/internal/redistest"
)

// sender applies commands as the gateway does: to one node, following a
// REDIRECT to the owner, and again after a refusal (nothing applied).
type sender struct {
	t       *testing.T
	entry   roompb.RoomsClient
	clients map[string]roompb.RoomsClient // by address
	acked   map[string][]string           // room → command ids, in acknowledged order
	n       int
}

func (s *sender) send(ctx context.Context, room string) {
	s.t.Helper()
	s.n++
	req := &roompb.ApplyRequest{RoomId: room, CommandId: fmt.Sprintf("%s-c%d", room, s.n), Op: "join"}
	c := s.entry
	for attempt := 0; ; attempt++ {
		require.Less(s.t, attempt, 100, "command %s: no answer after 100 attempts", req.CommandId)
		resp, err := c.Apply(ctx, req)
		switch {
		case err == nil && resp.Status == roompb.ApplyResponse_REDIRECT:
			c = s.clients[resp.OwnerAddr]
			require.NotNil(s.t, c, "redirect to unknown address %s", resp.OwnerAddr)
			continue
		case grpcdrain.IsRefused(err):
			c = s.entry
			time.Sleep(20 * time.Millisecond) // the gateway's backoff; nothing was applied
			continue
		}
		require.NoError(s.t, err, "command %s", req.CommandId)
		require.Equal(s.t, roompb.ApplyResponse_APPLIED, resp.Status)
		require.Equal(s.t, int64(len(s.acked[room])+1), resp.Seq, "command %s acknowledged at its room's next position", req.CommandId)
		s.acked[room] = append(s.acked[room], req.CommandId)
		return
	}
}

// owners reads each room's owner from its route key.
func owners(t *testing.T, ctx context.Context, rs *redistest.Server, rooms []string) map[string]int {
	t.Helper()
	per := map[string]int{}
	for _, id := range rooms {
		v, err := rs.Client().Get(ctx, room.RouteKey(id)).Result()
		if err == nil {
			per[strings.SplitN(v, "|", 2)[0]]++
		}
	}
	return per
}

// Rooms first touched while one node was up move to a node that joins,
// through the graceful hand-off, until both hold ceil(rooms/nodes): every
// command is acknowledged once at its position, and each moved room's
// writes carry a higher fence.
func TestBalanceMovesRoomsToAJoiningNode(t *testing.T) {
	rs := redistest.Start(t)
	ctx := context.Background()
	a := startNode(t, rs.URL(), "node-a", "BALANCE_INTERVAL=200ms")
	s := &sender{t: t, entry: a.client(t), clients: map[string]roompb.RoomsClient{a.grpc: a.client(t)}, acked: map[string][]string{}}
	rooms := make([]string, 12)
	for i := range rooms {
		rooms[i] = fmt.Sprintf("b%d", i)
		s.send(ctx, rooms[i])
	}
	require.Equal(t, map[string]int{"node-a": 12}, owners(t, ctx, rs, rooms))
	fences := map[string]int64{}
	for _, id := range rooms {
		r, err := a.client(t).GetRoom(ctx, &roompb.GetRoomRequest{RoomId: id})
		require.NoError(t, err)
		fences[id] = r.Fence
	}

	b := startNode(t, rs.URL(), "node-b", "BALANCE_INTERVAL=200ms")
	s.clients[b.grpc] = b.client(t)
	deadline := time.Now().Add(time.Minute)
	for {
		for _, id := range rooms {
			s.send(ctx, id) // a room moves when its next command comes
		}
		if per := owners(t, ctx, rs, rooms); per["node-a"] == 6 && per["node-b"] == 6 {
			break
		}
		require.True(t, time.Now().Before(deadline), "rooms per node after a minute: %v; want 6 and 6", owners(t, ctx, rs, rooms))
	}
	moved := 0
	for _, id := range rooms {
		r, err := b.client(t).GetRoom(ctx, &roompb.GetRoomRequest{RoomId: id})
		require.NoError(t, err)
		assert.Equal(t, s.acked[id], r.CommandIds, "room %s: every acknowledged command once, in order", id)
		if r.Fence > fences[id] {
			moved++
		}
	}
	assert.GreaterOrEqual(t, moved, 6, "rooms written under a higher fence after moving")
	assert.GreaterOrEqual(t, strings.Count(a.Output(), "room handed off for balance"), 6, a.Output())
	assert.NotContains(t, b.Output(), "room handed off for balance", "the joining node moved nothing back")
}
