package room

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/internal/mariadbtest"
)

// startSnapshots starts a real MariaDB and migrates it.
func startSnapshots(t *testing.T) (*SQLSnapshots, *sql.DB) {
	t.Helper()
	db := mariadbtest.Start(t).DB()
	snaps, err := NewSQLSnapshots(db)
	require.NoError(t, err, "NewSQLSnapshots")
	require.NoError(t, snaps.Migrate(context.Background()), "Migrate")
	return snaps, db
}

func newSQLNode(t *testing.T, rdb *redis.Client, snaps *SQLSnapshots, name string) node {
	t.Helper()
	leases := newTestLeases(rdb, name)
	svc, err := New(rdb, leases, Config{ErrHeld: errHeld, ErrDraining: errDraining, Logger: quiet, Snapshots: snaps})
	require.NoError(t, err, "New")
	return node{svc: svc, leases: leases}
}

func TestSQLSnapshotsMigrate(t *testing.T) {
	snaps, db := startSnapshots(t)
	ctx := context.Background()
	require.NoError(t, snaps.Migrate(ctx), "second Migrate: want nil (idempotent)")
	var v int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT version FROM schema_version WHERE id = 1").Scan(&v), "read schema_version")
	require.Equal(t, SchemaVersion, v, "schema_version")
	_, err := db.ExecContext(ctx, "UPDATE schema_version SET version = ? WHERE id = 1", SchemaVersion+1)
	require.NoError(t, err, "UPDATE schema_version")
	require.ErrorContains(t, snaps.Migrate(ctx), "schema version 2 is newer than this service's 1", "Migrate of a newer schema: want a refusal naming both versions")
}

func TestSQLSnapshotsConditionalUpsert(t *testing.T) {
	snaps, _ := startSnapshots(t)
	ctx := context.Background()
	state := func(n int) State {
		st := State{}
		for i := range n {
			_ = st.apply(int64(i+1), string(rune('a'+i)))
		}
		return st
	}
	// One room, writes in order; each row says what is stored after it.
	tests := []struct {
		name      string
		fence     int64
		seq       int
		wantErr   error
		wantFence int64
		wantSeq   int64
	}{
		{name: "first snapshot", fence: 5, seq: 2, wantFence: 5, wantSeq: 2},
		{name: "same owner, later", fence: 5, seq: 3, wantFence: 5, wantSeq: 3},
		{name: "same owner, same again", fence: 5, seq: 3, wantFence: 5, wantSeq: 3},
		{name: "same owner, older snapshot late", fence: 5, seq: 1, wantFence: 5, wantSeq: 3},
		{name: "older owner, more commands", fence: 4, seq: 9, wantErr: ErrFenced, wantFence: 5, wantSeq: 3},
		{name: "newer owner", fence: 6, seq: 4, wantFence: 6, wantSeq: 4},
		{name: "previous owner late", fence: 5, seq: 4, wantErr: ErrFenced, wantFence: 6, wantSeq: 4},
	}
	for _, tt := range tests {
		err := snaps.put(ctx, "r1", tt.fence, state(tt.seq))
		if tt.wantErr == nil {
			require.NoError(t, err, "%s: put fence %d seq %d", tt.name, tt.fence, tt.seq)
		} else {
			require.ErrorIs(t, err, tt.wantErr, "%s: put fence %d seq %d", tt.name, tt.fence, tt.seq)
		}
		rec, err := snaps.get(ctx, "r1")
		require.NoError(t, err, "%s: get", tt.name)
		require.Equal(t, tt.wantFence, rec.SnapshotFence, "%s: stored fence (seq %d %v)", tt.name, rec.SnapshotSeq, rec.CommandIDs)
		require.Equal(t, tt.wantSeq, rec.SnapshotSeq, "%s: stored seq (%v)", tt.name, rec.CommandIDs)
		require.Equal(t, state(int(tt.wantSeq)).CommandIDs, rec.CommandIDs, "%s: stored command ids", tt.name)
	}
}

// Two owners of one room in turn: the first loses its lease without
// noticing, the second takes the room over and snapshots it, then the
// first one's flush arrives late. MySQL must refuse it.
func TestSQLLateWriterCannotOverwriteNewerOwner(t *testing.T) {
	rdb := startRedis(t)
	snaps, _ := startSnapshots(t)
	ctx := context.Background()
	a, b := newSQLNode(t, rdb, snaps, "a"), newSQLNode(t, rdb, snaps, "b")
	apply := func(n node, cmd string, wantSeq int64) {
		t.Helper()
		resp, err := n.svc.Apply(ctx, &roompb.ApplyRequest{RoomId: "r1", CommandId: cmd, Op: "hello"})
		require.NoError(t, err, "apply %s", cmd)
		require.Equal(t, roompb.ApplyResponse_APPLIED, resp.GetStatus(), "apply %s: status (response %v)", cmd, resp)
		require.Equal(t, wantSeq, resp.GetSeq(), "apply %s: seq", cmd)
	}
	apply(a, "c1", 1)
	apply(a, "c2", 2)
	oldLease := a.leases.lease("r1")
	expire(t, rdb, "r1") // a does not know yet: its cell is still there

	apply(b, "c3", 3) // b recovers c1, c2 from the log
	require.NoError(t, b.svc.FlushRoom(ctx, b.leases.lease("r1")), "b flush")
	require.ErrorIs(t, a.svc.FlushRoom(ctx, oldLease), ErrFenced, "a's late flush")
	rec, err := snaps.get(ctx, "r1")
	require.NoError(t, err, "get the mysql snapshot")
	require.Equal(t, b.leases.lease("r1").token, rec.SnapshotFence, "mysql snapshot: fence; want b's (commands %v)", rec.CommandIDs)
	require.Equal(t, []string{"c1", "c2", "c3"}, rec.CommandIDs, "mysql snapshot: command ids")
}

// A room snapshotted to MySQL, then written to, then abandoned without a
// flush: the next owner recovers it from the MySQL snapshot plus the Redis
// log, and the log holds only what the snapshot does not.
func TestSQLRecoverFromSnapshotPlusLog(t *testing.T) {
	rdb := startRedis(t)
	snaps, _ := startSnapshots(t)
	ctx := context.Background()
	a, b := newSQLNode(t, rdb, snaps, "a"), newSQLNode(t, rdb, snaps, "b")
	for i, cmd := range []string{"c1", "c2", "c3"} {
		_, err := a.svc.Apply(ctx, &roompb.ApplyRequest{RoomId: "r1", CommandId: cmd, Op: "hello"})
		require.NoError(t, err, "apply %d", i)
	}
	require.NoError(t, a.svc.SnapshotAll(ctx), "SnapshotAll")
	require.Zero(t, rdb.XLen(ctx, logKey("r1")).Val(), "log entries after a snapshot at seq 3")
	require.Zero(t, rdb.Exists(ctx, snapKey("r1")).Val(), "%s exists; want snapshots only in mysql", snapKey("r1"))
	_, err := a.svc.Apply(ctx, &roompb.ApplyRequest{RoomId: "r1", CommandId: "c4", Op: "hello"})
	require.NoError(t, err, "apply c4")
	a.leases.lose("r1") // not flushed: left to expire
	expire(t, rdb, "r1")

	resp, err := b.svc.Apply(ctx, &roompb.ApplyRequest{RoomId: "r1", CommandId: "c5", Op: "hello"})
	require.NoError(t, err, "b apply")
	require.Equal(t, int64(5), resp.GetSeq(), "b apply: seq (response %v)", resp)
	// A command folded into the MySQL snapshot is still answered as its
	// first application was, and not applied again.
	resp, err = b.svc.Apply(ctx, &roompb.ApplyRequest{RoomId: "r1", CommandId: "c2", Op: "hello"})
	require.NoError(t, err, "b resend of c2")
	require.Equal(t, roompb.ApplyResponse_APPLIED, resp.GetStatus(), "b resend of c2: status (response %v)", resp)
	require.Equal(t, int64(2), resp.GetSeq(), "b resend of c2: seq")
	room, err := a.svc.GetRoom(ctx, &roompb.GetRoomRequest{RoomId: "r1"})
	require.NoError(t, err, "GetRoom")
	require.Equal(t, []string{"c1", "c2", "c3", "c4", "c5"}, room.GetCommandIds(), "read-back: command ids (snapshot seq %d)", room.GetSnapshotSeq())
	require.Equal(t, int64(3), room.GetSnapshotSeq(), "read-back: snapshot seq")
}

// A hung snapshot database must not stall the room loop: each turn ends
// with its interval, so the loop keeps beating its heartbeat and liveness
// stays ok (a restart cannot fix the database).
func TestRunKeepsBeatingWhileMySQLHangs(t *testing.T) {
	rdb := startRedis(t)
	srv := mariadbtest.Start(t)
	snaps, err := NewSQLSnapshots(srv.DB())
	require.NoError(t, err, "NewSQLSnapshots")
	require.NoError(t, snaps.Migrate(context.Background()), "Migrate")
	a := newSQLNode(t, rdb, snaps, "a")
	b := newBeats()
	a.svc.cfg.Heartbeat, a.svc.cfg.SnapshotInterval, a.svc.cfg.SnapshotTurn = b, 50*time.Millisecond, 50*time.Millisecond
	mustApply(t, a.svc, "r1", "c1", roompb.ApplyResponse_APPLIED)
	srv.Pause()
	t.Cleanup(srv.Resume) // after the loop stopped (cleanups run last first)
	runLoop(t, b, a.svc.Run)
	for i := range 4 { // a turn stuck on the database would stop them after the first
		await(t, b.ch, fmt.Sprintf("beat %d with the snapshot database hung", i))
	}
}
