package room

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/internal/mariadbtest"
)

// startSnapshots starts a real MariaDB and migrates it.
func startSnapshots(t *testing.T) (*SQLSnapshots, *sql.DB) {
	t.Helper()
	db := mariadbtest.Start(t).DB()
	snaps, err := NewSQLSnapshots(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := snaps.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return snaps, db
}

func newSQLNode(t *testing.T, rdb *redis.Client, snaps *SQLSnapshots, name string) node {
	t.Helper()
	leases := newTestLeases(rdb, name)
	svc, err := New(rdb, leases, Config{ErrHeld: errHeld, ErrDraining: errDraining, Logger: quiet, Snapshots: snaps})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return node{svc: svc, leases: leases}
}

func TestSQLSnapshotsMigrate(t *testing.T) {
	snaps, db := startSnapshots(t)
	ctx := context.Background()
	if err := snaps.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: got %v; want nil (idempotent)", err)
	}
	var v int
	if err := db.QueryRowContext(ctx, "SELECT version FROM schema_version WHERE id = 1").Scan(&v); err != nil || v != SchemaVersion {
		t.Fatalf("schema_version: got %d, %v; want %d", v, err, SchemaVersion)
	}
	if _, err := db.ExecContext(ctx, "UPDATE schema_version SET version = ? WHERE id = 1", SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	err := snaps.Migrate(ctx)
	if err == nil || !strings.Contains(err.Error(), "schema version 2 is newer than this service's 1") {
		t.Fatalf("Migrate of a newer schema: got %v; want a refusal naming both versions", err)
	}
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
		if !errors.Is(err, tt.wantErr) {
			t.Fatalf("%s: put fence %d seq %d: got %v; want %v", tt.name, tt.fence, tt.seq, err, tt.wantErr)
		}
		rec, err := snaps.get(ctx, "r1")
		if err != nil {
			t.Fatalf("%s: get: %v", tt.name, err)
		}
		if rec.SnapshotFence != tt.wantFence || rec.SnapshotSeq != tt.wantSeq || !slices.Equal(rec.CommandIDs, state(int(tt.wantSeq)).CommandIDs) {
			t.Fatalf("%s: stored fence %d seq %d %v; want fence %d seq %d", tt.name, rec.SnapshotFence, rec.SnapshotSeq, rec.CommandIDs, tt.wantFence, tt.wantSeq)
		}
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
		if err != nil || resp.GetStatus() != roompb.ApplyResponse_APPLIED || resp.GetSeq() != wantSeq {
			t.Fatalf("apply %s: got %v %v; want applied at seq %d", cmd, resp, err, wantSeq)
		}
	}
	apply(a, "c1", 1)
	apply(a, "c2", 2)
	oldLease := a.leases.lease("r1")
	expire(t, rdb, "r1") // a does not know yet: its cell is still there

	apply(b, "c3", 3) // b recovers c1, c2 from the log
	if err := b.svc.FlushRoom(ctx, b.leases.lease("r1")); err != nil {
		t.Fatalf("b flush: %v", err)
	}
	if err := a.svc.FlushRoom(ctx, oldLease); !errors.Is(err, ErrFenced) {
		t.Fatalf("a's late flush: got %v; want ErrFenced", err)
	}
	rec, err := snaps.get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"c1", "c2", "c3"}; rec.SnapshotFence != b.leases.lease("r1").token || !slices.Equal(rec.CommandIDs, want) {
		t.Fatalf("mysql snapshot: fence %d %v; want b's fence %d %v", rec.SnapshotFence, rec.CommandIDs, b.leases.lease("r1").token, want)
	}
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
		if _, err := a.svc.Apply(ctx, &roompb.ApplyRequest{RoomId: "r1", CommandId: cmd, Op: "hello"}); err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
	}
	if err := a.svc.SnapshotAll(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rdb.XLen(ctx, logKey("r1")).Val(); n != 0 {
		t.Fatalf("log after a snapshot at seq 3: got %d entries; want 0", n)
	}
	if n := rdb.Exists(ctx, snapKey("r1")).Val(); n != 0 {
		t.Fatalf("%s exists; want snapshots only in mysql", snapKey("r1"))
	}
	if _, err := a.svc.Apply(ctx, &roompb.ApplyRequest{RoomId: "r1", CommandId: "c4", Op: "hello"}); err != nil {
		t.Fatal(err)
	}
	a.leases.lose("r1") // not flushed: left to expire
	expire(t, rdb, "r1")

	resp, err := b.svc.Apply(ctx, &roompb.ApplyRequest{RoomId: "r1", CommandId: "c5", Op: "hello"})
	if err != nil || resp.GetSeq() != 5 {
		t.Fatalf("b apply: got %v %v; want seq 5", resp, err)
	}
	// A command folded into the MySQL snapshot is still answered as its
	// first application was, and not applied again.
	resp, err = b.svc.Apply(ctx, &roompb.ApplyRequest{RoomId: "r1", CommandId: "c2", Op: "hello"})
	if err != nil || resp.GetStatus() != roompb.ApplyResponse_APPLIED || resp.GetSeq() != 2 {
		t.Fatalf("b resend of c2: got %v %v; want applied at seq 2", resp, err)
	}
	room, err := a.svc.GetRoom(ctx, &roompb.GetRoomRequest{RoomId: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"c1", "c2", "c3", "c4", "c5"}; !slices.Equal(room.GetCommandIds(), want) || room.GetSnapshotSeq() != 3 {
		t.Fatalf("read-back: %v (snapshot seq %d); want %v (snapshot seq 3)", room.GetCommandIds(), room.GetSnapshotSeq(), want)
	}
}

// A hung snapshot database must not stall the room loop: each turn ends
// with its interval, so the loop keeps beating its heartbeat and liveness
// stays ok (a restart cannot fix the database).
func TestRunKeepsBeatingWhileMySQLHangs(t *testing.T) {
	rdb := startRedis(t)
	srv := mariadbtest.Start(t)
	snaps, err := NewSQLSnapshots(srv.DB())
	if err != nil {
		t.Fatal(err)
	}
	if err := snaps.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
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
