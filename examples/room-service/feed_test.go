package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/drainkit/drainkit/examples/room-service/internal/room"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/lease"
)

// countingReader is the room service, counting the reads of it.
type countingReader struct {
	roomReader
	reads atomic.Int64
}

func (r *countingReader) GetRoom(ctx context.Context, req *roompb.GetRoomRequest) (*roompb.Room, error) {
	r.reads.Add(1)
	return r.roomReader.GetRoom(ctx, req)
}

// Watchers of one room share its poller, each reads from its own
// position, and the poller stops with its last watcher: no goroutine is
// left once they have gone and the feeds are closed.
func TestFeedsShareOnePollerPerRoom(t *testing.T) {
	const watchers, commands = 20, 5
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // the last cleanup: after Redis has stopped
	ctx := context.Background()
	rdb, m := startLeases(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := room.New(rdb, leaseAdapter{m, log, &heldLeases{}}, room.Config{ErrHeld: lease.ErrHeld, ErrDraining: lease.ErrDraining, Logger: log})
	require.NoError(t, err)
	reader := &countingReader{roomReader: svc}
	fs := newFeeds(reader, 20*time.Millisecond)

	var wg sync.WaitGroup
	got := make([][]string, watchers)
	feedsSeen := make([]*feed, watchers)
	joined := make(chan struct{}, watchers)
	began := time.Now()
	for i := range watchers {
		wg.Go(func() {
			f := fs.join("f1")
			defer fs.leave("f1", f)
			feedsSeen[i] = f
			joined <- struct{}{}
			for {
				ids, _, changed := f.view()
				if len(ids) >= commands {
					got[i] = ids
					return
				}
				<-changed
			}
		})
	}
	for range watchers {
		<-joined
	}
	for i := range commands {
		resp, err := svc.Apply(ctx, &roompb.ApplyRequest{RoomId: "f1", CommandId: fmt.Sprintf("c%d", i), Op: "join"})
		require.NoError(t, err)
		require.Equal(t, roompb.ApplyResponse_APPLIED, resp.Status)
	}
	wg.Wait()
	elapsed := time.Since(began)
	for i := range got {
		assert.Equal(t, []string{"c0", "c1", "c2", "c3", "c4"}, got[i], "watcher %d", i)
	}
	polls := int64(elapsed/(20*time.Millisecond)) + 1
	assert.LessOrEqual(t, reader.reads.Load(), polls+1, "room reads in %s for %d watchers: one poller, one read per poll", elapsed, watchers)

	for _, f := range feedsSeen {
		require.Same(t, feedsSeen[0], f, "one feed for every watcher of the room")
	}
	again := fs.join("f1")
	assert.NotSame(t, feedsSeen[0], again, "a feed kept after its last watcher left")
	fs.leave("f1", again)
	require.NoError(t, fs.Close(ctx))
}
