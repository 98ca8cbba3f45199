package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

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
				ids, _, _, changed := f.view()
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

// watchStream is a WatchRoom server stream that hands the events sent to
// the test.
type watchStream struct {
	grpc.ServerStream
	ctx  context.Context
	sent chan *roompb.RoomEvent
}

func (s *watchStream) Context() context.Context        { return s.ctx }
func (s *watchStream) Send(ev *roompb.RoomEvent) error { s.sent <- ev; return nil }

// A resume after a seq this node's shared read has not reached yet (the
// gateway received it from another node, within this node's poll
// interval) is served from a fresh read, not refused as past the end:
// OUT_OF_RANGE is final for the gateway, which would end its subscribers'
// streams. A seq past the fresh read is refused.
func TestWatchRoomResumesAheadOfTheSharedRead(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rdb, m := startLeases(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := room.New(rdb, leaseAdapter{m, log, &heldLeases{}}, room.Config{ErrHeld: lease.ErrHeld, ErrDraining: lease.ErrDraining, Logger: log})
	require.NoError(t, err)
	apply := func(ids ...string) {
		for _, id := range ids {
			_, err := svc.Apply(ctx, &roompb.ApplyRequest{RoomId: "r", CommandId: id, Op: "join"})
			require.NoError(t, err)
		}
	}
	w := &watcher{feeds: newFeeds(svc, time.Hour)} // the shared read is made once, when the first watcher joins
	defer func() { require.NoError(t, w.feeds.Close(context.Background())) }()
	apply("c1", "c2")

	first := &watchStream{ctx: ctx, sent: make(chan *roompb.RoomEvent, 8)}
	firstDone := make(chan error, 1)
	go func() { firstDone <- w.WatchRoom(&roompb.WatchRoomRequest{RoomId: "r"}, first) }()
	<-first.sent
	<-first.sent // the shared read holds c1 and c2
	apply("c3", "c4")

	resumed := &watchStream{ctx: ctx, sent: make(chan *roompb.RoomEvent, 8)}
	resumedDone := make(chan error, 1)
	go func() { resumedDone <- w.WatchRoom(&roompb.WatchRoomRequest{RoomId: "r", AfterSeq: 3}, resumed) }()
	select {
	case ev := <-resumed.sent:
		assert.Equal(t, int64(4), ev.GetSeq())
		assert.Equal(t, "c4", ev.GetCommandId())
	case err := <-resumedDone:
		t.Fatalf("resume after seq 3, which Redis holds, ended: %v", err)
	}

	err = w.WatchRoom(&roompb.WatchRoomRequest{RoomId: "r", AfterSeq: 9}, &watchStream{ctx: ctx, sent: make(chan *roompb.RoomEvent, 8)})
	assert.Equal(t, codes.OutOfRange, status.Code(err), "got %v; want OUT_OF_RANGE", err)
	cancel()
	assert.ErrorIs(t, <-firstDone, context.Canceled)
	assert.ErrorIs(t, <-resumedDone, context.Canceled)
}

// scriptedReader answers with its log until it is told to fail, as a node
// cut off from Redis while its port still accepts does.
type scriptedReader struct {
	mu   sync.Mutex
	ids  []string
	fail bool
	hang bool // a failing read takes its whole budget, as when packets are dropped
}

func (r *scriptedReader) GetRoom(ctx context.Context, req *roompb.GetRoomRequest) (*roompb.Room, error) {
	r.mu.Lock()
	fail, hang := r.fail, r.hang
	ids := slices.Clone(r.ids)
	r.mu.Unlock()
	switch {
	case fail && hang:
		<-ctx.Done()
		return nil, ctx.Err()
	case fail:
		return nil, errors.New("dial tcp 10.0.0.9:6379: i/o timeout")
	}
	return &roompb.Room{RoomId: req.GetRoomId(), CommandIds: ids, Seq: int64(len(ids))}, nil
}

func (r *scriptedReader) set(fail bool, ids ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = fail
	r.ids = append(r.ids, ids...)
}

// A watch whose node cannot read the room ends UNAVAILABLE once the reads
// have failed for failedReadsLimit, so that the gateway resumes it on a
// node that can, rather than wait on a silent stream for as long as the
// fault lasts; reads failing for less leave it alone.
func TestWatchRoomEndsWhenItsReadsKeepFailing(t *testing.T) {
	for _, hang := range []bool{false, true} {
		t.Run(fmt.Sprintf("hang=%v", hang), func(t *testing.T) { testWatchRoomEndsWhenItsReadsKeepFailing(t, hang) })
	}
}

func testWatchRoomEndsWhenItsReadsKeepFailing(t *testing.T, hang bool) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := &scriptedReader{ids: []string{"c1"}, hang: hang}
		w := &watcher{feeds: newFeeds(r, watchEvery)}
		defer func() { require.NoError(t, w.feeds.Close(context.Background())) }()
		s := &watchStream{ctx: ctx, sent: make(chan *roompb.RoomEvent, 8)}
		done := make(chan error, 1)
		go func() { done <- w.WatchRoom(&roompb.WatchRoomRequest{RoomId: "r"}, s) }()
		assert.Equal(t, "c1", (<-s.sent).GetCommandId())

		if !hang { // a hung read fails after callBudget, the limit: no blip is shorter
			r.set(true)
			time.Sleep(failedReadsLimit - watchEvery) // a blip
			r.set(false, "c2")
			assert.Equal(t, "c2", (<-s.sent).GetCommandId(), "the watch outlived a blip")
		} else {
			r.set(false, "c2")
			assert.Equal(t, "c2", (<-s.sent).GetCommandId())
		}

		r.set(true)
		select {
		case err := <-done:
			assert.Equal(t, codes.Unavailable, status.Code(err), "got %v; want UNAVAILABLE", err)
			assert.Contains(t, err.Error(), "watch from seq 2 on another node")
		case <-time.After(failedReadsLimit + 2*watchEvery):
			t.Fatalf("the watch still waits %s after its reads began to fail", failedReadsLimit+2*watchEvery)
		}
	})
}

// A read cut short by its caller leaving (a watcher's client hung up
// during its own read) is no failed read of the room: it would start the
// clock that sends every watcher of the room elsewhere.
func TestACallerLeavingIsNoFailedRead(t *testing.T) {
	r := &scriptedReader{fail: true, hang: true}
	fs := newFeeds(r, watchEvery)
	f := &feed{changed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, fs.read(ctx, "r", f), context.Canceled)
	_, _, failing, _ := f.view()
	assert.False(t, failing)
	assert.True(t, f.failingSince.IsZero(), "failing since %v", f.failingSince)
}

// A watch that asks for heartbeats gets one at once and one whenever a
// period passed without a message, carrying the last seq sent; one that
// does not ask gets none, and a period out of range is refused naming it.
func TestWatchRoomHeartbeats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := &scriptedReader{ids: []string{"c1"}}
		w := &watcher{feeds: newFeeds(r, watchEvery)}
		defer func() { require.NoError(t, w.feeds.Close(context.Background())) }()
		watch := func(period string) (*watchStream, chan error) {
			sctx := ctx
			if period != "" {
				sctx = metadata.NewIncomingContext(ctx, metadata.Pairs(roompb.WatchHeartbeatKey, period))
			}
			s := &watchStream{ctx: sctx, sent: make(chan *roompb.RoomEvent, 64)}
			done := make(chan error, 1)
			go func() { done <- w.WatchRoom(&roompb.WatchRoomRequest{RoomId: "r"}, s) }()
			return s, done
		}
		beating, _ := watch("250ms")
		silent, _ := watch("")
		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		var got []string
		for len(beating.sent) > 0 {
			ev := <-beating.sent
			got = append(got, fmt.Sprintf("%d:%s", ev.GetSeq(), ev.GetCommandId()))
		}
		assert.Equal(t, []string{"0:", "1:c1", "1:", "1:", "1:", "1:"}, got, "a heartbeat at once, the event, then one per idle 250ms")
		assert.Len(t, silent.sent, 1, "only the event without asking")

		// An event restarts the period: the next heartbeat is 250ms after
		// it, not at the next quarter second.
		<-silent.sent
		time.Sleep(50 * time.Millisecond)  // t = 1.05s
		r.set(false, "c2")                 // read at the poll of t = 1.1s
		time.Sleep(250 * time.Millisecond) // t = 1.3s: a ticker would have beaten at 1.25s
		synctest.Wait()
		require.Len(t, beating.sent, 1)
		assert.Equal(t, "c2", (<-beating.sent).GetCommandId())
		time.Sleep(60 * time.Millisecond) // t = 1.36s
		synctest.Wait()
		require.Len(t, beating.sent, 1, "a heartbeat 250ms after the event")
		assert.Equal(t, int64(2), (<-beating.sent).GetSeq())

		_, done := watch("5ms")
		select {
		case err := <-done:
			assert.Equal(t, codes.InvalidArgument, status.Code(err), "got %v", err)
			assert.ErrorContains(t, err, `metadata room-watch-heartbeat="5ms"`)
		case <-time.After(time.Second):
			t.Error("a heartbeat period out of range was not refused")
		}
	})
}

// firstHangs hangs its first read for the read's budget (a dropped
// packet); every later read succeeds.
type firstHangs struct{ calls atomic.Int64 }

func (r *firstHangs) GetRoom(ctx context.Context, req *roompb.GetRoomRequest) (*roompb.Room, error) {
	if r.calls.Add(1) == 1 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &roompb.Room{RoomId: req.GetRoomId(), CommandIds: []string{"c1"}, Seq: 1}, nil
}

// A read that hung while later reads of the room succeeded (a watcher's
// own read beside the poller's) is no second of failures: dated from its
// start, before those successes, it would send every watcher of the room
// on this node away though the node reads the room fine.
func TestAHungReadAmidSuccessesIsNoSecondOfFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &firstHangs{}
		fs := newFeeds(r, watchEvery)
		f := &feed{changed: make(chan struct{})}
		done := make(chan error, 1)
		go func() { done <- fs.read(context.Background(), "r", f) }() // hangs for callBudget
		for range 9 {
			time.Sleep(100 * time.Millisecond)
			assert.NoError(t, fs.read(context.Background(), "r", f))
		}
		assert.Error(t, <-done)
		_, _, failing, _ := f.view()
		assert.False(t, failing, "failing after one hung read and nine good ones, the last 100ms ago")
	})
}
