package room

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/internal/redistest"
)

// FuzzApplyRequest sends any Apply request to a Service on a real Redis.
// One with a valid room id, command id and op is applied and read back;
// any other is refused with InvalidArgument naming the field, and leaves
// Redis as it was.
func FuzzApplyRequest(f *testing.F) {
	f.Add("r1", "c1", "join")
	f.Add("", "c1", "join")
	f.Add("r1", "", "leave")
	f.Add("r1", "c1", "dance")
	f.Add("a b", "c 1", "")
	f.Add(strings.Repeat("x", 65), "c1", "join")
	rdb := redistest.Start(f).Client()
	svc, err := New(rdb, newTestLeases(rdb, "a"), Config{ErrHeld: errHeld, ErrDraining: errDraining, Logger: quiet})
	require.NoError(f, err, "New")
	f.Fuzz(func(t *testing.T, roomID, commandID, op string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		before, err := rdb.DBSize(ctx).Result()
		require.NoError(t, err)
		resp, err := svc.Apply(ctx, &roompb.ApplyRequest{RoomId: roomID, CommandId: commandID, Op: op})
		valid := ValidateRoomID(roomID) == nil && validateCommandID(commandID) == nil && validateOp(op) == nil
		if valid {
			require.NoError(t, err, "Apply(%q, %q, %q)", roomID, commandID, op)
			assert.Equal(t, roompb.ApplyResponse_APPLIED, resp.GetStatus())
			rm, err := svc.GetRoom(ctx, &roompb.GetRoomRequest{RoomId: roomID})
			require.NoError(t, err, "GetRoom(%q)", roomID)
			assert.Contains(t, rm.GetCommandIds(), commandID, "the applied command read back")
			return
		}
		require.Equal(t, codes.InvalidArgument, status.Code(err), "Apply(%q, %q, %q): got %v", roomID, commandID, op, err)
		msg := status.Convert(err).Message()
		assert.True(t, strings.Contains(msg, "room_id") || strings.Contains(msg, "command_id") || strings.Contains(msg, "op "),
			"got %q; want the field named", msg)
		after, err := rdb.DBSize(ctx).Result()
		require.NoError(t, err)
		assert.Equal(t, before, after, "keys in Redis after a refused Apply")
	})
}
