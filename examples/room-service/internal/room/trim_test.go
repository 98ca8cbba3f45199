package room

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
		assert.Equal(t, wantLog, rdb.XLen(ctx, logKey("r1")).Val(), "XLEN %s", logKey("r1"))
		assert.Equal(t, wantCmds, rdb.HLen(ctx, cmdsKey("r1")).Val(), "HLEN %s", cmdsKey("r1"))
	}
	readsBack := func(wantSeq, wantSnap int64, want []string) {
		t.Helper()
		r := getRoom(t, a.svc, "r1")
		require.Equal(t, wantSeq, r.GetSeq(), "GetRoom: seq (snapshot_seq %d %v)", r.GetSnapshotSeq(), r.GetCommandIds())
		require.Equal(t, wantSnap, r.GetSnapshotSeq(), "GetRoom: snapshot_seq (%v)", r.GetCommandIds())
		require.Equal(t, want, r.GetCommandIds(), "GetRoom: command ids")
	}

	for _, id := range ids(0, 5) {
		mustApply(t, a.svc, "r1", id, roompb.ApplyResponse_APPLIED)
	}
	require.NoError(t, a.svc.SnapshotAll(ctx), "a's SnapshotAll")
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
		got := mustApply(t, a.svc, "r1", give.cmd, roompb.ApplyResponse_APPLIED).GetSeq()
		require.Equal(t, give.want, got, "seq of the retry of %s on the owner", give.cmd)
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
		got := mustApply(t, b.svc, "r1", give.cmd, roompb.ApplyResponse_APPLIED).GetSeq()
		require.Equal(t, give.want, got, "seq of the retry of %s on the next owner", give.cmd)
	}
	require.Equal(t, int64(9), mustApply(t, b.svc, "r1", "c8", roompb.ApplyResponse_APPLIED).GetSeq(), "seq of the first new command on b")
	readsBack(9, 5, ids(0, 9))

	// Only the holder of the current fence trims: a's late snapshot writes
	// and removes nothing.
	all := State{Seq: 9, CommandIDs: ids(0, 9)}
	require.ErrorIs(t, a.svc.store.snapshot(ctx, "r1", oldFence, all), ErrFenced, "snapshot with the old fence")
	sizes(4, 4)
	readsBack(9, 5, ids(0, 9))

	// b's snapshot folds the rest; the room still reads back whole.
	require.NoError(t, b.svc.SnapshotAll(ctx), "b's SnapshotAll")
	sizes(0, 0)
	readsBack(9, 9, ids(0, 9))
	require.Equal(t, int64(7), mustApply(t, b.svc, "r1", "c6", roompb.ApplyResponse_APPLIED).GetSeq(), "seq of the retry of c6 after the second snapshot")
}
