package app

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

func TestPreferredSpreadsRooms(t *testing.T) {
	addrs := []string{"10.0.0.1:13001", "10.0.0.2:13001", "10.0.0.3:13001"}
	const rooms = 3000
	count := make([]int, len(addrs))
	for r := range rooms {
		count[preferred(fmt.Sprintf("room-%d", r), addrs)]++
	}
	for i, n := range count {
		assert.InDelta(t, rooms/len(addrs), n, float64(rooms/len(addrs)/5), "%s: got %d of %d rooms; want about a third", addrs[i], n, rooms)
	}
}

// When a node leaves, only its rooms move, and the others' stay put: a
// crash or a drain moves about 1/N of the rooms.
func TestPreferredMovesOnlyTheLeavingNodesRooms(t *testing.T) {
	all := []string{"a:1", "b:1", "c:1", "d:1"}
	without := []string{"a:1", "b:1", "d:1"} // c left
	moved := 0
	for r := range 1000 {
		room := fmt.Sprintf("room-%d", r)
		before, after := all[preferred(room, all)], without[preferred(room, without)]
		if before != "c:1" {
			assert.Equal(t, before, after, "room %s moved from %s though its node stayed", room, before)
			continue
		}
		moved++
	}
	assert.InDelta(t, 250, moved, 60, "got %d rooms moved; want about a quarter", moved)
	// The answer does not depend on the order of the addresses.
	for r := range 100 {
		room := fmt.Sprintf("room-%d", r)
		rev := []string{"d:1", "c:1", "b:1", "a:1"}
		assert.Equal(t, all[preferred(room, all)], rev[preferred(room, rev)])
	}
}

// TestCommandsForARoomGoToOneBackend: the balanced connection routes each
// room's commands to the same backend, and the rooms spread over both.
func TestCommandsForARoomGoToOneBackend(t *testing.T) {
	seen := map[string]map[string]bool{} // backend → rooms
	backend := func(name string) *testRooms {
		return &testRooms{apply: func(_ context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
			return &roompb.ApplyResponse{Status: roompb.ApplyResponse_APPLIED, Seq: 1, OwnerNode: name}, nil
		}}
	}
	a, b := startBackend(t, backend("a")), startBackend(t, backend("b"))
	api := startAPI(t, a.addr, b.addr)
	// Wait (bounded) until both backends are ready in the balancer: until
	// then every room goes to the one that is.
	for i := 0; i < 100; i++ {
		resp, err := api.forwardApply(context.Background(), &roompb.ApplyRequest{RoomId: fmt.Sprintf("warm-%d", i), CommandId: "c", Op: "join"})
		require.NoError(t, err)
		seen[resp.GetOwnerNode()] = map[string]bool{}
		if len(seen) == 2 {
			break
		}
	}
	require.Len(t, seen, 2, "both backends ready")
	for range 3 {
		for r := range 20 {
			room := fmt.Sprintf("room-%d", r)
			resp, err := api.forwardApply(context.Background(), &roompb.ApplyRequest{RoomId: room, CommandId: "c", Op: "join"})
			require.NoError(t, err)
			seen[resp.GetOwnerNode()][room] = true
		}
	}
	for room := range seen["a"] {
		assert.False(t, seen["b"][room], "room %s went to both backends", room)
	}
	assert.NotEmpty(t, seen["a"])
	assert.NotEmpty(t, seen["b"])
	assert.Equal(t, 20, len(seen["a"])+len(seen["b"]))
}
