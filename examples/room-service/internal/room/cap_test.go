package room

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
)

// TestOutboxCapsEventStream: the events stream keeps about StreamMaxLen of
// the newest events, and an event leaves a room's outbox only once it is
// in the stream.
func TestOutboxCapsEventStream(t *testing.T) {
	// Small stream nodes, so that approximate trimming (which removes
	// whole nodes) trims close to the cap.
	const node, maxLen, events = 10, 20, 100
	rdb := redistest.Start(t, "--stream-node-max-entries", strconv.Itoa(node)).Client()
	ctx := context.Background()
	rdb.Set(ctx, RouteKey("r1"), "a|l|1", 0)
	st := store{rdb: rdb}
	for i := range events {
		_, _, err := st.append(ctx, "r1", 1, fmt.Sprintf("c%d", i), "join")
		require.NoError(t, err, "append c%d", i)
	}
	ob, err := NewOutbox(rdb, OutboxConfig{Batch: 10, StreamMaxLen: maxLen, Logger: quiet})
	require.NoError(t, err, "NewOutbox")
	for more := true; more; {
		more, err = ob.publish(ctx, "r1")
		require.NoError(t, err, "publish")
		// Whatever the cap removed was published: the stream and the
		// outbox together still hold the newest events, without a gap.
		left := rdb.LLen(ctx, outboxKey("r1")).Val()
		msgs := rdb.XRange(ctx, DefaultEventStream, "-", "+").Val()
		require.NotEmpty(t, msgs, "stream with %d events left in the outbox", left)
		last, _ := strconv.Atoi(msgs[len(msgs)-1].Values["seq"].(string))
		require.Equal(t, events-int(left), last, "seq of the newest event in the stream (%d still in the outbox)", left)
		for i, m := range msgs {
			seq, _ := strconv.Atoi(m.Values["seq"].(string))
			require.Equal(t, last-len(msgs)+1+i, seq, "seq of stream entry %d (else a gap)", i)
		}
	}
	n := rdb.XLen(ctx, DefaultEventStream).Val()
	require.GreaterOrEqual(t, n, int64(maxLen), "XLEN %s after %d events: want %d to %d", DefaultEventStream, events, maxLen, maxLen+node)
	require.LessOrEqual(t, n, int64(maxLen+node), "XLEN %s after %d events: want %d to %d", DefaultEventStream, events, maxLen, maxLen+node)
	require.Zero(t, rdb.LLen(ctx, outboxKey("r1")).Val(), "events in the outbox after publishing")
}
