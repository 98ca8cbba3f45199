package room

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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
	if err != nil {
		t.Fatalf("Apply(%s, %s): %v", room, cmd, err)
	}
	if resp.GetStatus() != want {
		t.Fatalf("Apply(%s, %s): got status %v; want %v", room, cmd, resp.GetStatus(), want)
	}
	return resp
}

func getRoom(t *testing.T, s *Service, room string) *roompb.Room {
	t.Helper()
	r, err := s.GetRoom(context.Background(), &roompb.GetRoomRequest{RoomId: room})
	if err != nil {
		t.Fatalf("GetRoom(%s): %v", room, err)
	}
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
	if !proto.Equal(resp, first) {
		t.Fatalf("resent c1: got %v; want the first answer %v", resp, first)
	}
	r := getRoom(t, a.svc, "r1")
	if want := []string{"c1", "c2"}; r.GetSeq() != 2 || !slices.Equal(r.GetCommandIds(), want) {
		t.Fatalf("GetRoom: got seq %d %v; want 2 %v", r.GetSeq(), r.GetCommandIds(), want)
	}
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
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("Apply: got code %v (%v); want %v", got, err, tt.wantCode)
			}
			if err != nil {
				return
			}
			if resp.GetStatus() != tt.wantStatus || resp.GetOwnerNode() != tt.wantOwner || resp.GetOwnerAddr() != addrOf(tt.wantOwner) {
				t.Fatalf("Apply: got %v %q %q; want %v %q %q", resp.GetStatus(), resp.GetOwnerNode(), resp.GetOwnerAddr(),
					tt.wantStatus, tt.wantOwner, addrOf(tt.wantOwner))
			}
			if _, live := self.svc.cellState(t, tt.room); live {
				t.Fatalf("node a keeps a cell for %s it does not own", tt.room)
			}
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
		if got := status.Code(err); got != codes.InvalidArgument {
			t.Fatalf("Apply op %q: got code %v (%v); want InvalidArgument", op, got, err)
		}
		if want := fmt.Sprintf("op %q", op); !strings.Contains(status.Convert(err).Message(), want) {
			t.Errorf("Apply op %q: got message %q; want it to name %s", op, status.Convert(err).Message(), want)
		}
	}
	keys, err := rdb.Keys(context.Background(), "room:*").Result()
	if err != nil || len(keys) != 0 {
		t.Fatalf("keys after refused commands: got %v (%v); want none", keys, err)
	}
	for i, op := range []string{"hello", "join"} { // the set the README, the demo and the e2e load use
		resp, err := a.svc.Apply(context.Background(), &roompb.ApplyRequest{RoomId: "r1", CommandId: fmt.Sprint("c", i), Op: op})
		if err != nil || resp.GetStatus() != roompb.ApplyResponse_APPLIED {
			t.Fatalf("Apply op %q: got %v, %v; want APPLIED", op, resp.GetStatus(), err)
		}
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
	if got := status.Code(err); got != codes.Unavailable {
		t.Fatalf("Apply on the stale owner: got %v (%v); want Unavailable", got, err)
	}
	if _, live := a.svc.cellState(t, "r1"); live {
		t.Fatal("stale owner kept its cell after a fenced write")
	}
	if r := getRoom(t, b.svc, "r1"); !slices.Equal(r.GetCommandIds(), []string{"c1", "c2"}) {
		t.Fatalf("GetRoom: got %v; want [c1 c2] (the fenced c3 must not be written)", r.GetCommandIds())
	}
}

func TestRecoveryEqualsPreCrashState(t *testing.T) {
	rdb := startRedis(t)
	ctx := context.Background()
	a, b := newNode(t, rdb, "a", nil), newNode(t, rdb, "b", nil)
	for i := range 5 {
		mustApply(t, a.svc, "r1", fmt.Sprintf("c%d", i), roompb.ApplyResponse_APPLIED)
	}
	if err := a.svc.SnapshotAll(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 5; i < 8; i++ {
		mustApply(t, a.svc, "r1", fmt.Sprintf("c%d", i), roompb.ApplyResponse_APPLIED)
	}
	before, _ := a.svc.cellState(t, "r1")

	// a crashes: no flush; its lease expires and b takes the room with a
	// higher fence.
	expire(t, rdb, "r1")
	if got := mustApply(t, b.svc, "r1", "c3", roompb.ApplyResponse_APPLIED).GetSeq(); got != 4 { // dedup survives the move
		t.Fatalf("resent c3 after the move: got seq %d; want 4", got)
	}
	after, _ := b.svc.cellState(t, "r1")
	if after.Seq != before.Seq || !slices.Equal(after.CommandIDs, before.CommandIDs) {
		t.Fatalf("recovered state: got seq %d %v; want seq %d %v", after.Seq, after.CommandIDs, before.Seq, before.CommandIDs)
	}
	resp := mustApply(t, b.svc, "r1", "c8", roompb.ApplyResponse_APPLIED)
	if resp.GetSeq() != before.Seq+1 {
		t.Fatalf("first command after recovery: got seq %d; want %d", resp.GetSeq(), before.Seq+1)
	}
	r := getRoom(t, a.svc, "r1") // any node reads any room
	if r.GetSnapshotSeq() != 5 || r.GetSeq() != 9 {
		t.Fatalf("GetRoom: got snapshot_seq %d seq %d; want 5 9", r.GetSnapshotSeq(), r.GetSeq())
	}
}

func TestFlushRoomSnapshotsAndDropsCell(t *testing.T) {
	rdb := startRedis(t)
	ctx := context.Background()
	a := newNode(t, rdb, "a", nil)
	mustApply(t, a.svc, "r1", "c1", roompb.ApplyResponse_APPLIED)
	mustApply(t, a.svc, "r1", "c2", roompb.ApplyResponse_APPLIED)
	l := a.leases.lease("r1")
	a.leases.setDraining()

	if err := a.svc.FlushRoom(ctx, l); err != nil {
		t.Fatalf("FlushRoom: %v", err)
	}
	if _, live := a.svc.cellState(t, "r1"); live {
		t.Fatal("cell still live after FlushRoom")
	}
	if r := getRoom(t, a.svc, "r1"); r.GetSnapshotSeq() != 2 || r.GetFence() != l.Token() {
		t.Fatalf("GetRoom after flush: got snapshot_seq %d fence %d; want 2 %d", r.GetSnapshotSeq(), r.GetFence(), l.Token())
	}
	if n := rdb.XLen(ctx, logKey("r1")).Val(); n != 0 {
		t.Fatalf("log after flush: got %d entries; want 0", n)
	}
	if _, err := apply(ctx, a.svc, "r1", "c3"); status.Code(err) != codes.Unavailable {
		t.Fatalf("Apply after flush on a draining node: got %v; want Unavailable", err)
	}
	if err := a.svc.FlushRoom(ctx, l); err != nil {
		t.Fatalf("second FlushRoom: got %v; want nil", err)
	}
}

func TestFlushRoomFencedLeavesError(t *testing.T) {
	rdb := startRedis(t)
	a := newNode(t, rdb, "a", nil)
	failures := prometheus.NewCounter(prometheus.CounterOpts{Name: "room_snapshot_flush_failures_total"})
	a.svc.cfg.SnapshotFailures = failures
	mustApply(t, a.svc, "r1", "c1", roompb.ApplyResponse_APPLIED)
	l := a.leases.lease("r1")
	expire(t, rdb, "r1")
	if err := a.svc.FlushRoom(context.Background(), l); !errors.Is(err, ErrFenced) {
		t.Fatalf("FlushRoom after losing the room: got %v; want ErrFenced", err)
	}
	var m dto.Metric
	if err := failures.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 1 {
		t.Fatalf("snapshot failures counted: got %v; want 1", got)
	}
	if _, live := a.svc.cellState(t, "r1"); live {
		t.Fatal("cell still live after a failed FlushRoom")
	}
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
			if err != nil {
				t.Errorf("Apply: %v", err)
				return
			}
			seqs[i] = resp.GetSeq()
		})
	}
	wg.Wait()
	r := getRoom(t, a.svc, "r1")
	if r.GetSeq() != n/2 || len(r.GetCommandIds()) != n/2 {
		t.Fatalf("GetRoom: got seq %d with %d commands; want %d distinct commands", r.GetSeq(), len(r.GetCommandIds()), n/2)
	}
	for i := range n / 2 { // both copies of a command id got the same seq
		if seqs[i] != seqs[i+n/2] || seqs[i] == 0 {
			t.Fatalf("c%d: got seqs %d and %d; want one nonzero seq", i, seqs[i], seqs[i+n/2])
		}
	}
	st, _ := a.svc.cellState(t, "r1")
	if !slices.Equal(st.CommandIDs, r.GetCommandIds()) {
		t.Fatalf("cell state %v differs from Redis %v", st.CommandIDs, r.GetCommandIds())
	}
}

func TestSnapshotAllDropsCellWithLostLease(t *testing.T) {
	rdb := startRedis(t)
	a := newNode(t, rdb, "a", nil)
	mustApply(t, a.svc, "r1", "c1", roompb.ApplyResponse_APPLIED)
	a.leases.lose("r1")
	if err := a.svc.SnapshotAll(context.Background()); err != nil {
		t.Fatalf("SnapshotAll: %v", err)
	}
	if _, live := a.svc.cellState(t, "r1"); live {
		t.Fatal("cell with a lost lease still live after SnapshotAll")
	}
	if r := getRoom(t, a.svc, "r1"); r.GetSnapshotSeq() != 0 {
		t.Fatalf("snapshot_seq: got %d; want 0 (a lost lease writes no snapshot)", r.GetSnapshotSeq())
	}
}
