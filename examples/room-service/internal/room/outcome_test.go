package room

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/drain/grpcdrain"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/internal/redistest"
)

// breakAppend lets the append script reach Redis, then loses its reply, as
// a connection reset after the server ran it would.
type breakAppend struct{ on bool }

func (h *breakAppend) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *breakAppend) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *breakAppend) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.on && strings.HasPrefix(strings.ToLower(cmd.Name()), "eval") && strings.Contains(cmd.String(), logKey("r1")) {
			return &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}
		}
		return err
	}
}

// A write whose reply was lost is not a refusal: the outcome is unknown,
// and saying "not processed, retry anywhere" would be a lie. A refusal, in
// turn, carries the detail that says nothing was written.
// applyLosingReply starts a node, applies c1 to r1, then applies c2 with
// its reply lost and returns the node and c2's error, checked to be
// Unknown.
func applyLosingReply(t *testing.T) (node, error) {
	t.Helper()
	srv := redistest.Start(t)
	hook := &breakAppend{}
	rdb := srv.Client()
	rdb.AddHook(hook)
	a := newNode(t, rdb, "a", nil)
	mustApply(t, a.svc, "r1", "c1", roompb.ApplyResponse_APPLIED)

	hook.on = true
	_, err := apply(context.Background(), a.svc, "r1", "c2")
	hook.on = false
	require.Equal(t, codes.Unknown, status.Code(err), "code of Apply with a lost reply (err %v)", err)
	return a, err
}

func TestApplyOutcomeUnknownIsNotARefusal(t *testing.T) {
	a, err := applyLosingReply(t)
	require.False(t, grpcdrain.IsRefused(err), "Apply with a lost reply claims nothing was processed: %v", err)
	// It was applied: a retry with the same command id says so.
	mustApply(t, a.svc, "r1", "c2", roompb.ApplyResponse_APPLIED)

	a.leases.setDraining()
	_, err = apply(context.Background(), a.svc, "r2", "c1")
	require.True(t, grpcdrain.IsRefused(err), "Apply on a draining node: got %v; want a refusal (UNAVAILABLE with RetryInfo)", err)
}

// A command already in the log is a duplicate whoever retries it, also a
// node that lost the room since: "fenced" would claim nothing was written.
func TestDuplicateBeatsFence(t *testing.T) {
	rdb := startRedis(t)
	a, b := newNode(t, rdb, "a", nil), newNode(t, rdb, "b", nil)
	mustApply(t, a.svc, "r1", "c1", roompb.ApplyResponse_APPLIED)
	expire(t, rdb, "r1") // a's lease lapses; b takes the room
	mustApply(t, b.svc, "r1", "c2", roompb.ApplyResponse_APPLIED)
	mustApply(t, a.svc, "r1", "c1", roompb.ApplyResponse_APPLIED) // a still thinks it owns r1
}

// A room whose last append lost its reply has a state this node no longer
// knows. Its flush must reload it and snapshot every command in the log:
// it used to take the room for clean (nothing applied since the last
// snapshot it knew of), drop it as flushed and let its lease be released.
func TestFlushAfterUnknownOutcomeSnapshotsTheLog(t *testing.T) {
	a, _ := applyLosingReply(t)
	a.leases.setDraining()
	require.NoError(t, a.svc.FlushRoom(context.Background(), a.leases.lease("r1")), "FlushRoom")
	require.Equal(t, int64(2), getRoom(t, a.svc, "r1").GetSnapshotSeq(), "snapshot seq after the flush (c2 was applied, its reply lost)")
}
