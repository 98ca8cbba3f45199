package room

import (
	"context"
	"fmt"
	"strconv"
	"testing"

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
		if _, _, err := st.append(ctx, "r1", 1, fmt.Sprintf("c%d", i), "join"); err != nil {
			t.Fatal(err)
		}
	}
	ob, err := NewOutbox(rdb, OutboxConfig{Batch: 10, StreamMaxLen: maxLen, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for more := true; more; {
		if more, err = ob.publish(ctx, "r1"); err != nil {
			t.Fatal(err)
		}
		// Whatever the cap removed was published: the stream and the
		// outbox together still hold the newest events, without a gap.
		left := rdb.LLen(ctx, outboxKey("r1")).Val()
		msgs := rdb.XRange(ctx, DefaultEventStream, "-", "+").Val()
		if len(msgs) == 0 {
			t.Fatalf("stream empty with %d events left in the outbox", left)
		}
		last, _ := strconv.Atoi(msgs[len(msgs)-1].Values["seq"].(string))
		if want := events - int(left); last != want {
			t.Fatalf("newest event in the stream: got seq %d; want %d (%d still in the outbox)", last, want, left)
		}
		for i, m := range msgs {
			seq, _ := strconv.Atoi(m.Values["seq"].(string))
			if want := last - len(msgs) + 1 + i; seq != want {
				t.Fatalf("stream entry %d: got seq %d; want %d (a gap)", i, seq, want)
			}
		}
	}
	if n := rdb.XLen(ctx, DefaultEventStream).Val(); n < maxLen || n > maxLen+node {
		t.Fatalf("XLEN %s after %d events: got %d; want %d to %d", DefaultEventStream, events, n, maxLen, maxLen+node)
	}
	if n := rdb.LLen(ctx, outboxKey("r1")).Val(); n != 0 {
		t.Fatalf("outbox after publishing: got %d events; want 0", n)
	}
}
