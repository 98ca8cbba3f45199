package room

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStoreAppendFence(t *testing.T) {
	tests := []struct {
		name      string
		route     string // value of room:route:{r1}; empty: no key
		fence     int64
		wantErr   error
		wantWrote bool
	}{
		{name: "current fence", route: "n1|lease-7|7", fence: 7, wantWrote: true},
		{name: "stale fence", route: "n2|lease-8|8", fence: 7, wantErr: ErrFenced},
		{name: "fence is a suffix of the route's", route: "n2|lease-17|17", fence: 7, wantErr: ErrFenced},
		{name: "route expired", fence: 7, wantErr: ErrFenced},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := startRedis(t)
			ctx := context.Background()
			if tt.route != "" {
				rdb.Set(ctx, RouteKey("r1"), tt.route, 0)
			}
			st := store{rdb: rdb}
			out, seq, err := st.append(ctx, "r1", tt.fence, "c1", "op")
			if tt.wantErr == nil {
				require.NoError(t, err, "append")
			} else {
				require.ErrorIs(t, err, tt.wantErr, "append")
			}
			if tt.wantWrote {
				require.Equal(t, applied, out, "append: outcome (seq %d)", seq)
				require.Equal(t, int64(1), seq, "append: seq")
			}
			wantLen := int64(0)
			if tt.wantWrote {
				wantLen = 1
			}
			for _, key := range []string{logKey("r1"), cmdsKey("r1"), outboxKey("r1")} {
				n, err := rdb.Exists(ctx, key).Result()
				assert.NoError(t, err, "EXISTS %s", key)
				assert.Equal(t, wantLen, n, "EXISTS %s", key)
			}
		})
	}
}

func TestStoreDuplicateHasNoEffect(t *testing.T) {
	rdb := startRedis(t)
	ctx := context.Background()
	rdb.Set(ctx, RouteKey("r1"), "n1|l|3", 0)
	st := store{rdb: rdb}
	for i, give := range []struct {
		cmd      string
		wantOut  outcome
		wantSeq  int64
		wantLogs int64
	}{
		{"a", applied, 1, 1},
		{"b", applied, 2, 2},
		{"a", duplicate, 1, 2},
		{"c", applied, 3, 3},
	} {
		out, seq, err := st.append(ctx, "r1", 3, give.cmd, "op-"+give.cmd)
		require.NoError(t, err, "append %d (%s)", i, give.cmd)
		require.Equal(t, give.wantOut, out, "append %d (%s): outcome (seq %d)", i, give.cmd, seq)
		require.Equal(t, give.wantSeq, seq, "append %d (%s): seq", i, give.cmd)
		for _, n := range []int64{rdb.XLen(ctx, logKey("r1")).Val(), rdb.LLen(ctx, outboxKey("r1")).Val()} {
			require.Equal(t, give.wantLogs, n, "after append %d: log/outbox entries", i)
		}
	}
	rec, err := st.load(ctx, "r1")
	require.NoError(t, err, "load")
	require.Equal(t, int64(3), rec.Seq, "load: seq (commands %v)", rec.CommandIDs)
	require.Equal(t, []string{"a", "b", "c"}, rec.CommandIDs, "load: command ids")
}

func TestStoreSnapshotTrimsLog(t *testing.T) {
	rdb := startRedis(t)
	ctx := context.Background()
	rdb.Set(ctx, RouteKey("r1"), "n1|l|5", 0)
	st := store{rdb: rdb}
	var state State
	for _, cmd := range []string{"a", "b", "c"} {
		_, seq, err := st.append(ctx, "r1", 5, cmd, "")
		require.NoError(t, err, "append %s", cmd)
		require.NoError(t, state.apply(seq, cmd), "apply %s at seq %d", cmd, seq)
	}
	require.ErrorIs(t, st.snapshot(ctx, "r1", 4, state), ErrFenced, "snapshot with stale fence")
	require.Zero(t, rdb.Exists(ctx, snapKey("r1")).Val(), "stale snapshot wrote %s", snapKey("r1"))
	require.NoError(t, st.snapshot(ctx, "r1", 5, state.clone()), "snapshot")
	require.Zero(t, rdb.XLen(ctx, logKey("r1")).Val(), "log entries after snapshot at seq 3")
	_, _, err := st.append(ctx, "r1", 5, "d", "")
	require.NoError(t, err, "append d")
	// An older snapshot arriving late must neither regress nor untrim.
	old := State{Seq: 1, CommandIDs: []string{"a"}}
	require.NoError(t, st.snapshot(ctx, "r1", 5, old), "late snapshot at seq 1")
	rec, err := st.load(ctx, "r1")
	require.NoError(t, err, "load")
	require.Equal(t, int64(4), rec.Seq, "load: seq (snapshot_seq %d fence %d %v)", rec.SnapshotSeq, rec.SnapshotFence, rec.CommandIDs)
	require.Equal(t, int64(3), rec.SnapshotSeq, "load: snapshot_seq (fence %d %v)", rec.SnapshotFence, rec.CommandIDs)
	require.Equal(t, int64(5), rec.SnapshotFence, "load: fence (%v)", rec.CommandIDs)
	require.Equal(t, []string{"a", "b", "c", "d"}, rec.CommandIDs, "load: command ids")
	require.Equal(t, int64(1), rdb.XLen(ctx, logKey("r1")).Val(), "log entries (seq 4)")
}
