package room

import (
	"context"
	"fmt"
	"slices"
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
// any other is refused with InvalidArgument naming the first invalid field
// (GetRoom refuses an invalid room id alike), and leaves Redis as it was.
// Validity is the id syntax written out (isID), not the product's regexp.
func FuzzApplyRequest(f *testing.F) {
	f.Add("r1", "c1", "join")
	f.Add("", "c1", "join")
	f.Add("r1", "", "leave")
	f.Add("r1", "c1", "dance")
	f.Add("a b", "c 1", "")
	f.Add(strings.Repeat("x", 65), "c1", "join")
	f.Add("r1\n", "c1", "join")
	rdb := redistest.Start(f).Client()
	svc, err := New(rdb, newTestLeases(rdb, "a"), Config{ErrHeld: errHeld, ErrDraining: errDraining, Logger: quiet})
	require.NoError(f, err, "New")
	f.Fuzz(func(t *testing.T, roomID, commandID, op string) {
		if len(roomID)+len(commandID)+len(op) > 3*MaxIDLen {
			return // longer reaches no new code, and takes the fuzzer's minimizer seconds
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		before, err := rdb.DBSize(ctx).Result()
		require.NoError(t, err)
		resp, err := svc.Apply(ctx, &roompb.ApplyRequest{RoomId: roomID, CommandId: commandID, Op: op})
		var invalid string
		switch {
		case !isID(roomID):
			invalid = "room_id"
		case !isID(commandID):
			invalid = "command_id"
		case !slices.Contains(roompb.Ops(), op):
			invalid = "op"
		}
		if invalid == "" {
			require.NoError(t, err, "Apply(%q, %q, %q)", roomID, commandID, op)
			assert.Equal(t, roompb.ApplyResponse_APPLIED, resp.GetStatus())
			rm, err := svc.GetRoom(ctx, &roompb.GetRoomRequest{RoomId: roomID})
			require.NoError(t, err, "GetRoom(%q)", roomID)
			assert.Contains(t, rm.GetCommandIds(), commandID, "the applied command read back")
			return
		}
		refused := func(call string, err error) {
			require.Equal(t, codes.InvalidArgument, status.Code(err), "%s: got %v; want InvalidArgument", call, err)
			msg := status.Convert(err).Message()
			assert.True(t, strings.HasPrefix(msg, "room: "+invalid+" "), "%s: got %q; want %s named", call, msg, invalid)
		}
		refused(fmt.Sprintf("Apply(%q, %q, %q)", roomID, commandID, op), err)
		if invalid == "room_id" {
			_, err := svc.GetRoom(ctx, &roompb.GetRoomRequest{RoomId: roomID})
			refused(fmt.Sprintf("GetRoom(%q)", roomID), err)
		}
		after, err := rdb.DBSize(ctx).Result()
		require.NoError(t, err)
		assert.Equal(t, before, after, "keys in Redis after a refused request")
	})
}

// isID is the syntax of room and command ids written out: 1 to MaxIDLen
// bytes of A-Z, a-z, 0-9, '_' and '-'.
func isID(s string) bool {
	const idChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
	return len(s) >= 1 && len(s) <= MaxIDLen && strings.Trim(s, idChars) == ""
}
