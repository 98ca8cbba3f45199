package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/room-service/internal/room"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/internal/mariadbtest"
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
	b, svc, out, target := startBalancer(t, rdb, m, nil)
	_, err := svc.Apply(ctx, &roompb.ApplyRequest{RoomId: "r1", CommandId: "c1", Op: "join"})
	require.NoError(t, err)
	// Someone else's value under the room's lease key: the snapshot's
	// fenced write is refused, so the flush fails.
	require.NoError(t, rdb.Set(ctx, room.RouteKey("r1"), "node-x|other|1", 0).Err())

	b.handOff(ctx, move{Room: "r1", To: target})
	require.Contains(t, out.String(), "room not handed off: snapshot not flushed", "the hand-off reached its flush, which failed")
	assert.Empty(t, b.sent, "rooms in transit after a hand-off whose flush failed")
	table := b.inTransit(ctx, []nodeLoad{target})
	assert.Equal(t, 0, table[0].Rooms, "rooms counted for the target")
}

// A hand-off for balance whose flush fails keeps the room here, state and
// all, so the drain's hand-off flushes it before releasing it. The balance
// flush used to drop the room's cell even when it failed; the drain's
// hand-off then found a held lease without a cell, took it for a room with
// nothing to flush, and released it unflushed (caught by the e2e
// TestDrainWhileMySQLSlow, whose table lock failed a balance flush).
func TestDrainFlushesRoomWhoseBalanceFlushFailed(t *testing.T) {
	ctx := context.Background()
	rdb, m := startLeases(t)
	db := mariadbtest.Start(t).DB()
	snaps, err := room.NewSQLSnapshots(db)
	require.NoError(t, err)
	require.NoError(t, snaps.Migrate(ctx))
	b, svc, out, target := startBalancer(t, rdb, m, snaps)
	for _, cmd := range []string{"c1", "c2"} {
		_, err = svc.Apply(ctx, &roompb.ApplyRequest{RoomId: "r1", CommandId: cmd, Op: "join"})
		require.NoError(t, err)
	}

	// The snapshot table is away for the balance flush: its write fails at
	// once and for certain (a timed-out write could still land later).
	_, err = db.ExecContext(ctx, "RENAME TABLE room_snapshots TO room_snapshots_away")
	require.NoError(t, err)
	b.handOff(ctx, move{Room: "r1", To: target})
	_, err = db.ExecContext(ctx, "RENAME TABLE room_snapshots_away TO room_snapshots")
	require.NoError(t, err)
	require.Contains(t, out.String(), "room not handed off: snapshot not flushed", "the hand-off reached its flush, which failed")
	// The room goes on here, under the same lease and from the same state.
	resp, err := svc.Apply(ctx, &roompb.ApplyRequest{RoomId: "r1", CommandId: "c3", Op: "join"})
	require.NoError(t, err)
	assert.EqualValues(t, 3, resp.Seq, "the command after the failed move")
	assert.Equal(t, 1, strings.Count(out.String(), `event=acquired`), "one ownership: %s", out.String())

	hook, err := m.HandOff(func(ctx context.Context, l *lease.Lease) error { return svc.FlushRoom(ctx, l) }, 1)
	require.NoError(t, err)
	require.NoError(t, hook.Run(ctx), "the drain's hand-off, with the table back")
	var seq int64
	require.NoError(t, db.QueryRowContext(ctx, "SELECT seq FROM room_snapshots WHERE room_id = 'r1'").Scan(&seq),
		"r1's snapshot after the drain's hand-off released it")
	assert.EqualValues(t, 3, seq, "the snapshot of a released room holds every command applied")
}

// startBalancer wires node-a's balancer and room service over m (snapshots
// in snaps, or in Redis if nil), logging as text to the returned buffer,
// which is written only while the test's goroutine calls in or waits; and
// publishes node-b as a live, not draining, balance target.
func startBalancer(t *testing.T, rdb *redis.Client, m *lease.Manager, snaps *room.SQLSnapshots) (*balancer, *room.Service, *bytes.Buffer, nodeLoad) {
	t.Helper()
	out := new(bytes.Buffer)
	log := slog.New(slog.NewTextHandler(out, nil))
	lm, err := lifecycle.New(lifecycle.Config{Service: "room-service", NodeID: "node-a"})
	require.NoError(t, err)
	held := &heldLeases{}
	b := newBalancer(rdb, held, lm, "node-a", config{Advertise: "127.0.0.1:1", BalanceInterval: time.Second}, log)
	svc, err := room.New(rdb, leaseAdapter{m, log, held}, room.Config{ErrHeld: lease.ErrHeld, ErrDraining: lease.ErrDraining, Logger: log, Snapshots: snaps})
	require.NoError(t, err)
	b.svc = svc
	target := nodeLoad{Node: "node-b", Addr: "127.0.0.1:2", AtUnixMs: time.Now().UnixMilli(), UntilUnixMs: time.Now().Add(time.Minute).UnixMilli()}
	v, err := json.Marshal(target)
	require.NoError(t, err)
	require.NoError(t, rdb.HSet(context.Background(), balanceKey, target.Node, v).Err())
	return b, svc, out, target
}

// A node whose balance entry missed its last turn (frozen, or cut off
// from Redis) is sent no room: a room noted for it is acquired by the node
// asked, and no hand-off starts towards it.
func TestNoRoomGoesToASilentNode(t *testing.T) {
	ctx := context.Background()
	rdb, m := startLeases(t)
	b, svc, _, target := startBalancer(t, rdb, m, nil)
	_, err := svc.Apply(ctx, &roompb.ApplyRequest{RoomId: "r2", CommandId: "c1", Op: "join"})
	require.NoError(t, err) // held here, so a hand-off of it would start
	require.NoError(t, rdb.Set(ctx, placeKey("r1"), target.Node, time.Minute).Err())
	node, addr, err := b.Place(ctx, "r1")
	require.NoError(t, err)
	assert.Equal(t, target.Addr, addr, "room noted for %s while it answers: placed at %q", node, addr)

	silent := target
	silent.AtUnixMs = time.Now().Add(-3 * b.interval).UnixMilli() // its entry still counts, its turns stopped
	v, err := json.Marshal(silent)
	require.NoError(t, err)
	require.NoError(t, rdb.HSet(ctx, balanceKey, silent.Node, v).Err())
	node, addr, err = b.Place(ctx, "r1")
	require.NoError(t, err)
	assert.Empty(t, node+addr, "room noted for a node silent for 3 turns: placed there; want acquired here")

	b.handOff(ctx, move{Room: "r2", To: silent})
	n, err := rdb.Exists(ctx, placeKey("r2")).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a hand-off towards a silent node wrote its note")
	assert.Empty(t, b.answering([]nodeLoad{silent}, "node-a"), "silent node left in the table a move is planned on")
}
