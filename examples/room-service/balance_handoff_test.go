package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/room-service/internal/room"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/lease"
	"github.com/drainkit/drainkit/lifecycle"
)

// A hand-off whose flush fails keeps the room here, so the room must not
// count as in transit towards its target at the next turns: it did, for as
// long as a next-node note lasts, and the plan then saw the target fuller
// than it was.
func TestHandOffWhoseFlushFailedIsNotInTransit(t *testing.T) {
	ctx := context.Background()
	rdb, m := startLeases(t)
	var out bytes.Buffer // everything here logs on the test's goroutine
	log := slog.New(slog.NewTextHandler(&out, nil))
	lm, err := lifecycle.New(lifecycle.Config{Service: "room-service", NodeID: "node-a"})
	require.NoError(t, err)
	held := &heldLeases{}
	b := newBalancer(rdb, held, lm, "node-a", config{Advertise: "127.0.0.1:1", BalanceInterval: time.Second}, log)
	svc, err := room.New(rdb, leaseAdapter{m, log, held}, room.Config{ErrHeld: lease.ErrHeld, ErrDraining: lease.ErrDraining, Logger: log})
	require.NoError(t, err)
	b.svc = svc

	_, err = svc.Apply(ctx, &roompb.ApplyRequest{RoomId: "r1", CommandId: "c1", Op: "join"})
	require.NoError(t, err)
	target := nodeLoad{Node: "node-b", Addr: "127.0.0.1:2", UntilUnixMs: time.Now().Add(time.Minute).UnixMilli()}
	v, err := json.Marshal(target)
	require.NoError(t, err)
	require.NoError(t, rdb.HSet(ctx, balanceKey, target.Node, v).Err())
	// Someone else's value under the room's lease key: the snapshot's
	// fenced write is refused, so the flush fails.
	require.NoError(t, rdb.Set(ctx, room.RouteKey("r1"), "node-x|other|1", 0).Err())

	b.handOff(ctx, move{Room: "r1", To: target})
	require.Contains(t, out.String(), "room not handed off: snapshot not flushed", "the hand-off reached its flush, which failed")
	assert.Empty(t, b.sent, "rooms in transit after a hand-off whose flush failed")
	table := b.inTransit(ctx, []nodeLoad{target})
	assert.Equal(t, 0, table[0].Rooms, "rooms counted for the target")
}
