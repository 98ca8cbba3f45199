package room

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

func apply(ctx context.Context, s *Service, room, cmd string) (*roompb.ApplyResponse, error) {
	return s.Apply(ctx, &roompb.ApplyRequest{RoomId: room, CommandId: cmd, Op: roompb.OpJoin})
}

func mustApply(t *testing.T, s *Service, room, cmd string, want roompb.ApplyResponse_Status) *roompb.ApplyResponse {
	t.Helper()
	resp, err := apply(context.Background(), s, room, cmd)
	require.NoError(t, err, "Apply(%s, %s)", room, cmd)
	require.Equal(t, want, resp.GetStatus(), "Apply(%s, %s): status", room, cmd)
	return resp
}

func getRoom(t *testing.T, s *Service, room string) *roompb.Room {
	t.Helper()
	r, err := s.GetRoom(context.Background(), &roompb.GetRoomRequest{RoomId: room})
	require.NoError(t, err, "GetRoom(%s)", room)
	return r
}

// A resend of an applied command_id gets exactly the first application's
// answer (APPLIED at its seq, no marker of a resend) and changes nothing.
func TestApplyResendAnswersAsFirst(t *testing.T) {
	rdb := startRedis(t)
	a := newNode(t, rdb, "a", nil)
	first := mustApply(t, a.svc, "r1", "c1", roompb.ApplyResponse_APPLIED)
	mustApply(t, a.svc, "r1", "c2", roompb.ApplyResponse_APPLIED)
	resp := mustApply(t, a.svc, "r1", "c1", roompb.ApplyResponse_APPLIED)
	require.True(t, proto.Equal(resp, first), "resent c1: got %v; want the first answer %v", resp, first)
	r := getRoom(t, a.svc, "r1")
	require.Equal(t, int64(2), r.GetSeq(), "GetRoom: seq (commands %v)", r.GetCommandIds())
	require.Equal(t, []string{"c1", "c2"}, r.GetCommandIds(), "GetRoom: command ids")
}

func TestApplyRefusals(t *testing.T) {
	tests := []struct {
		name       string
		room       string
		cmd        string
		op         string
		setup      func(t *testing.T, self, other node)
		wantCode   codes.Code
		wantStatus roompb.ApplyResponse_Status
		wantOwner  string
	}{
		{
			name: "held elsewhere redirects to the owner",
			room: "r1", cmd: "c1",
			setup: func(t *testing.T, self, other node) {
				mustApply(t, other.svc, "r1", "c0", roompb.ApplyResponse_APPLIED)
			},
			wantStatus: roompb.ApplyResponse_REDIRECT, wantOwner: "b",
		},
		{
			name: "draining is unavailable",
			room: "r1", cmd: "c1",
			setup:    func(t *testing.T, self, other node) { self.leases.setDraining() },
			wantCode: codes.Unavailable,
		},
		{
			name: "lost lease with a new owner redirects",
			room: "r1", cmd: "c1",
			setup: func(t *testing.T, self, other node) {
				mustApply(t, self.svc, "r1", "c0", roompb.ApplyResponse_APPLIED)
				self.leases.lose("r1")
				expire(t, self.leases.rdb, "r1")
				mustApply(t, other.svc, "r1", "c00", roompb.ApplyResponse_APPLIED)
			},
			wantStatus: roompb.ApplyResponse_REDIRECT, wantOwner: "b",
		},
		{name: "bad room id", room: "r{1}", cmd: "c1", wantCode: codes.InvalidArgument},
		{name: "empty command id", room: "r1", cmd: "", wantCode: codes.InvalidArgument},
		{name: "op too long", room: "r1", cmd: "c1", op: strings.Repeat("x", 4097), wantCode: codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := startRedis(t)
			self, other := newNode(t, rdb, "a", nil), newNode(t, rdb, "b", nil)
			if tt.setup != nil {
				tt.setup(t, self, other)
			}
			op := tt.op
			if op == "" {
				op = roompb.OpJoin
			}
			req := &roompb.ApplyRequest{RoomId: tt.room, CommandId: tt.cmd, Op: op}
			resp, err := self.svc.Apply(context.Background(), req)
			require.Equal(t, tt.wantCode, status.Code(err), "Apply: code (err %v)", err)
			if err != nil {
				return
			}
			require.Equal(t, tt.wantStatus, resp.GetStatus(), "Apply: status (owner %q %q)", resp.GetOwnerNode(), resp.GetOwnerAddr())
			require.Equal(t, tt.wantOwner, resp.GetOwnerNode(), "Apply: owner node (addr %q)", resp.GetOwnerAddr())
			require.Equal(t, addrOf(tt.wantOwner), resp.GetOwnerAddr(), "Apply: owner addr")
			_, live := self.svc.cellState(t, tt.room)
			require.False(t, live, "node a keeps a cell for %s it does not own", tt.room)
		})
	}
}

// TestApplyRefusesUnknownOp: room-service checks the op itself (defence in
// depth behind the gateway): an op outside the closed set is
// InvalidArgument naming the field and the value, and nothing is written.
func TestApplyRefusesUnknownOp(t *testing.T) {
	rdb := startRedis(t)
	a := newNode(t, rdb, "a", nil)
	for _, op := range []string{"", "drop table", "JOIN", "join "} {
		_, err := a.svc.Apply(context.Background(), &roompb.ApplyRequest{RoomId: "r1", CommandId: "c1", Op: op})
		require.Equal(t, codes.InvalidArgument, status.Code(err), "Apply op %q: code (err %v)", op, err)
		assert.Contains(t, status.Convert(err).Message(), fmt.Sprintf("op %q", op), "Apply op %q: message naming the op", op)
	}
	keys, err := rdb.Keys(context.Background(), "room:*").Result()
	require.NoError(t, err, "KEYS room:*")
	require.Empty(t, keys, "keys after refused commands")
	for i, op := range []string{"hello", "join"} { // the set the README, the demo and the e2e load use
		resp, err := a.svc.Apply(context.Background(), &roompb.ApplyRequest{RoomId: "r1", CommandId: fmt.Sprint("c", i), Op: op})
		require.NoError(t, err, "Apply op %q", op)
		require.Equal(t, roompb.ApplyResponse_APPLIED, resp.GetStatus(), "Apply op %q: status", op)
	}
}

func TestApplyAfterLeaseExpiredIsFenced(t *testing.T) {
	rdb := startRedis(t)
	a, b := newNode(t, rdb, "a", nil), newNode(t, rdb, "b", nil)
	mustApply(t, a.svc, "r1", "c1", roompb.ApplyResponse_APPLIED)
	// a's lease expired in Redis and b took the room before a's renewer
	// noticed: a still believes it owns the room.
	expire(t, rdb, "r1")
	mustApply(t, b.svc, "r1", "c2", roompb.ApplyResponse_APPLIED)

	_, err := apply(context.Background(), a.svc, "r1", "c3")
	require.Equal(t, codes.Unavailable, status.Code(err), "Apply on the stale owner: code (err %v)", err)
	_, live := a.svc.cellState(t, "r1")
	require.False(t, live, "stale owner kept its cell after a fenced write")
	require.Equal(t, []string{"c1", "c2"}, getRoom(t, b.svc, "r1").GetCommandIds(), "GetRoom: command ids (the fenced c3 must not be written)")
}

func TestRecoveryEqualsPreCrashState(t *testing.T) {
	rdb := startRedis(t)
	ctx := context.Background()
	a, b := newNode(t, rdb, "a", nil), newNode(t, rdb, "b", nil)
	for i := range 5 {
		mustApply(t, a.svc, "r1", fmt.Sprintf("c%d", i), roompb.ApplyResponse_APPLIED)
	}
	require.NoError(t, a.svc.SnapshotAll(ctx), "SnapshotAll")
	for i := 5; i < 8; i++ {
		mustApply(t, a.svc, "r1", fmt.Sprintf("c%d", i), roompb.ApplyResponse_APPLIED)
	}
	before, _ := a.svc.cellState(t, "r1")

	// a crashes: no flush; its lease expires and b takes the room with a
	// higher fence.
	expire(t, rdb, "r1")
	got := mustApply(t, b.svc, "r1", "c3", roompb.ApplyResponse_APPLIED).GetSeq()
	require.Equal(t, int64(4), got, "seq of c3 resent after the move") // dedup survives the move
	after, _ := b.svc.cellState(t, "r1")
	require.Equal(t, before.Seq, after.Seq, "recovered state: seq (commands %v)", after.CommandIDs)
	require.Equal(t, before.CommandIDs, after.CommandIDs, "recovered state: command ids")
	resp := mustApply(t, b.svc, "r1", "c8", roompb.ApplyResponse_APPLIED)
	require.Equal(t, before.Seq+1, resp.GetSeq(), "seq of the first command after recovery")
	r := getRoom(t, a.svc, "r1") // any node reads any room
	require.Equal(t, int64(5), r.GetSnapshotSeq(), "GetRoom: snapshot_seq (seq %d)", r.GetSeq())
	require.Equal(t, int64(9), r.GetSeq(), "GetRoom: seq")
}

func TestFlushRoomSnapshotsAndDropsCell(t *testing.T) {
	rdb := startRedis(t)
	ctx := context.Background()
	a := newNode(t, rdb, "a", nil)
	mustApply(t, a.svc, "r1", "c1", roompb.ApplyResponse_APPLIED)
	mustApply(t, a.svc, "r1", "c2", roompb.ApplyResponse_APPLIED)
	l := a.leases.lease("r1")
	a.leases.setDraining()

	require.NoError(t, a.svc.FlushRoom(ctx, l), "FlushRoom")
	_, live := a.svc.cellState(t, "r1")
	require.False(t, live, "cell still live after FlushRoom")
	r := getRoom(t, a.svc, "r1")
	require.Equal(t, int64(2), r.GetSnapshotSeq(), "GetRoom after flush: snapshot_seq (fence %d)", r.GetFence())
	require.Equal(t, l.Token(), r.GetFence(), "GetRoom after flush: fence")
	require.Zero(t, rdb.XLen(ctx, logKey("r1")).Val(), "log entries after flush")
	_, err := apply(ctx, a.svc, "r1", "c3")
	require.Equal(t, codes.Unavailable, status.Code(err), "Apply after flush on a draining node: code (err %v)", err)
	require.NoError(t, a.svc.FlushRoom(ctx, l), "second FlushRoom")
}

func TestFlushRoomFencedLeavesError(t *testing.T) {
	rdb := startRedis(t)
	a := newNode(t, rdb, "a", nil)
	failures := prometheus.NewCounter(prometheus.CounterOpts{Name: "room_snapshot_flush_failures_total"})
	a.svc.cfg.SnapshotFailures = failures
	mustApply(t, a.svc, "r1", "c1", roompb.ApplyResponse_APPLIED)
	l := a.leases.lease("r1")
	expire(t, rdb, "r1")
	require.ErrorIs(t, a.svc.FlushRoom(context.Background(), l), ErrFenced, "FlushRoom after losing the room")
	var m dto.Metric
	require.NoError(t, failures.Write(&m), "write the failures counter")
	require.Equal(t, 1.0, m.GetCounter().GetValue(), "snapshot failures counted")
	_, live := a.svc.cellState(t, "r1")
	require.False(t, live, "cell still live after a failed FlushRoom")
}

func TestConcurrentCommandsSerializePerRoom(t *testing.T) {
	rdb := startRedis(t)
	a := newNode(t, rdb, "a", nil)
	const n = 40
	seqs := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, err := apply(context.Background(), a.svc, "r1", fmt.Sprintf("c%d", i%(n/2)))
			if !assert.NoError(t, err, "Apply") {
				return
			}
			seqs[i] = resp.GetSeq()
		})
	}
	wg.Wait()
	r := getRoom(t, a.svc, "r1")
	require.Equal(t, int64(n/2), r.GetSeq(), "GetRoom: seq (%d commands); want %d distinct commands", len(r.GetCommandIds()), n/2)
	require.Len(t, r.GetCommandIds(), n/2, "GetRoom: commands; want %d distinct commands", n/2)
	for i := range n / 2 { // both copies of a command id got the same seq
		require.NotZero(t, seqs[i], "c%d: seq (other copy got %d); want one nonzero seq", i, seqs[i+n/2])
		require.Equal(t, seqs[i], seqs[i+n/2], "c%d: seqs of its two copies; want one nonzero seq", i)
	}
	st, _ := a.svc.cellState(t, "r1")
	require.Equal(t, r.GetCommandIds(), st.CommandIDs, "cell state's command ids; want those in Redis")
}

func TestSnapshotAllDropsCellWithLostLease(t *testing.T) {
	rdb := startRedis(t)
	a := newNode(t, rdb, "a", nil)
	mustApply(t, a.svc, "r1", "c1", roompb.ApplyResponse_APPLIED)
	a.leases.lose("r1")
	require.NoError(t, a.svc.SnapshotAll(context.Background()), "SnapshotAll")
	_, live := a.svc.cellState(t, "r1")
	require.False(t, live, "cell with a lost lease still live after SnapshotAll")
	require.Zero(t, getRoom(t, a.svc, "r1").GetSnapshotSeq(), "snapshot_seq (a lost lease writes no snapshot)")
}
