package room

import (
	"context"
	"errors"
	"slices"
	"testing"
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
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("append: got err %v; want %v", err, tt.wantErr)
			}
			if tt.wantWrote && (out != applied || seq != 1) {
				t.Fatalf("append: got outcome %d seq %d; want applied seq 1", out, seq)
			}
			wantLen := int64(0)
			if tt.wantWrote {
				wantLen = 1
			}
			for _, key := range []string{logKey("r1"), cmdsKey("r1"), outboxKey("r1")} {
				n, err := rdb.Exists(ctx, key).Result()
				if err != nil || n != wantLen {
					t.Errorf("EXISTS %s: got %d (%v); want %d", key, n, err, wantLen)
				}
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
		if err != nil || out != give.wantOut || seq != give.wantSeq {
			t.Fatalf("append %d (%s): got %d seq %d err %v; want %d seq %d", i, give.cmd, out, seq, err, give.wantOut, give.wantSeq)
		}
		for _, n := range []int64{rdb.XLen(ctx, logKey("r1")).Val(), rdb.LLen(ctx, outboxKey("r1")).Val()} {
			if n != give.wantLogs {
				t.Fatalf("after append %d: got %d log/outbox entries; want %d", i, n, give.wantLogs)
			}
		}
	}
	rec, err := st.load(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "c"}; rec.Seq != 3 || !slices.Equal(rec.CommandIDs, want) {
		t.Fatalf("load: got seq %d %v; want 3 %v", rec.Seq, rec.CommandIDs, want)
	}
}

func TestStoreSnapshotTrimsLog(t *testing.T) {
	rdb := startRedis(t)
	ctx := context.Background()
	rdb.Set(ctx, RouteKey("r1"), "n1|l|5", 0)
	st := store{rdb: rdb}
	var state State
	for _, cmd := range []string{"a", "b", "c"} {
		_, seq, err := st.append(ctx, "r1", 5, cmd, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := state.apply(seq, cmd); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.snapshot(ctx, "r1", 4, state); !errors.Is(err, ErrFenced) {
		t.Fatalf("snapshot with stale fence: got %v; want ErrFenced", err)
	}
	if n := rdb.Exists(ctx, snapKey("r1")).Val(); n != 0 {
		t.Fatalf("stale snapshot wrote %s", snapKey("r1"))
	}
	if err := st.snapshot(ctx, "r1", 5, state.clone()); err != nil {
		t.Fatal(err)
	}
	if n := rdb.XLen(ctx, logKey("r1")).Val(); n != 0 {
		t.Fatalf("log after snapshot at seq 3: got %d entries; want 0", n)
	}
	if _, _, err := st.append(ctx, "r1", 5, "d", ""); err != nil {
		t.Fatal(err)
	}
	// An older snapshot arriving late must neither regress nor untrim.
	old := State{Seq: 1, CommandIDs: []string{"a"}}
	if err := st.snapshot(ctx, "r1", 5, old); err != nil {
		t.Fatal(err)
	}
	rec, err := st.load(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "c", "d"}; rec.Seq != 4 || rec.SnapshotSeq != 3 || rec.SnapshotFence != 5 || !slices.Equal(rec.CommandIDs, want) {
		t.Fatalf("load: got seq %d snapshot_seq %d fence %d %v; want 4 3 5 %v", rec.Seq, rec.SnapshotSeq, rec.SnapshotFence, rec.CommandIDs, want)
	}
	if n := rdb.XLen(ctx, logKey("r1")).Val(); n != 1 {
		t.Fatalf("log: got %d entries; want 1 (seq 4)", n)
	}
}
