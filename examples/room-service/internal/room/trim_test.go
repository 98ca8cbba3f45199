package room

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// TestSnapshotTrimsCommandsAndKeepsDedup: a snapshot removes the commands
// it folds from the log and from the dedup hash, the room reads back the
// same, and a retry of a trimmed command is still answered with what its
// first application produced, by the owner and by the next owner.
func TestSnapshotTrimsCommandsAndKeepsDedup(t *testing.T) {
	rdb := startRedis(t)
	ctx := context.Background()
	a, b := newNode(t, rdb, "a", nil), newNode(t, rdb, "b", nil)
	ids := func(from, to int) []string {
		var s []string
		for i := from; i < to; i++ {
			s = append(s, fmt.Sprintf("c%d", i))
		}
		return s
	}
	sizes := func(wantLog, wantCmds int64) {
		t.Helper()
		if n := rdb.XLen(ctx, logKey("r1")).Val(); n != wantLog {
			t.Errorf("XLEN %s: got %d; want %d", logKey("r1"), n, wantLog)
		}
		if n := rdb.HLen(ctx, cmdsKey("r1")).Val(); n != wantCmds {
			t.Errorf("HLEN %s: got %d; want %d", cmdsKey("r1"), n, wantCmds)
		}
	}
	readsBack := func(wantSeq, wantSnap int64, want []string) {
		t.Helper()
		r := getRoom(t, a.svc, "r1")
		if r.GetSeq() != wantSeq || r.GetSnapshotSeq() != wantSnap || !slices.Equal(r.GetCommandIds(), want) {
			t.Fatalf("GetRoom: got seq %d snapshot_seq %d %v; want %d %d %v",
				r.GetSeq(), r.GetSnapshotSeq(), r.GetCommandIds(), wantSeq, wantSnap, want)
		}
	}

	for _, id := range ids(0, 5) {
		mustApply(t, a.svc, "r1", id, roompb.ApplyResponse_APPLIED)
	}
	if err := a.svc.SnapshotAll(ctx); err != nil {
		t.Fatal(err)
	}
	sizes(0, 0) // everything folded into the snapshot
	for _, id := range ids(5, 8) {
		mustApply(t, a.svc, "r1", id, roompb.ApplyResponse_APPLIED)
	}
	sizes(3, 3) // only the commands after the snapshot
	readsBack(8, 5, ids(0, 8))

	// Retries of a trimmed and of a kept command, on the owner.
	for _, give := range []struct {
		cmd  string
		want int64
	}{{"c2", 3}, {"c6", 7}} {
		if got := mustApply(t, a.svc, "r1", give.cmd, roompb.ApplyResponse_APPLIED).GetSeq(); got != give.want {
			t.Fatalf("retry of %s on the owner: got seq %d; want %d", give.cmd, got, give.want)
		}
	}

	// a crashes without a flush; b takes the room with a higher fence and
	// answers late retries from snapshot + log.
	oldFence := a.leases.lease("r1").Token()
	a.leases.lose("r1")
	expire(t, rdb, "r1")
	for _, give := range []struct {
		cmd  string
		want int64
	}{{"c0", 1}, {"c4", 5}, {"c7", 8}} {
		if got := mustApply(t, b.svc, "r1", give.cmd, roompb.ApplyResponse_APPLIED).GetSeq(); got != give.want {
			t.Fatalf("retry of %s on the next owner: got seq %d; want %d", give.cmd, got, give.want)
		}
	}
	if got := mustApply(t, b.svc, "r1", "c8", roompb.ApplyResponse_APPLIED).GetSeq(); got != 9 {
		t.Fatalf("first new command on b: got seq %d; want 9", got)
	}
	readsBack(9, 5, ids(0, 9))

	// Only the holder of the current fence trims: a's late snapshot writes
	// and removes nothing.
	all := State{Seq: 9, CommandIDs: ids(0, 9)}
	if err := a.svc.store.snapshot(ctx, "r1", oldFence, all); !errors.Is(err, ErrFenced) {
		t.Fatalf("snapshot with the old fence: got %v; want ErrFenced", err)
	}
	sizes(4, 4)
	readsBack(9, 5, ids(0, 9))

	// b's snapshot folds the rest; the room still reads back whole.
	if err := b.svc.SnapshotAll(ctx); err != nil {
		t.Fatal(err)
	}
	sizes(0, 0)
	readsBack(9, 9, ids(0, 9))
	if got := mustApply(t, b.svc, "r1", "c6", roompb.ApplyResponse_APPLIED).GetSeq(); got != 7 {
		t.Fatalf("retry of c6 after the second snapshot: got seq %d; want 7", got)
	}
}
